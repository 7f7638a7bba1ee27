# SPDX-License-Identifier: GPL-3.0-or-later
"""Problem.systematics: covmat = diag(d) + S S^T, validation, reordering, select, builders."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from _datasets import random_dataset

from hyperscan.data import CLOSURE_SIZES, Dataset, Problem
from hyperscan.data._real import experimental_covariance, load_real_dataset, real_problem


def _check_factorisation(p: Problem) -> None:
    """covmat == diag(d) + S S^T per block to 1e-12 relative, d > 0, columns inside blocks."""
    s, d = p.systematics, p.uncorrelated_variance
    assert s is not None and s.ndim == 2 and s.shape[0] == p.n_data
    assert d.shape == (p.n_data,) and np.all(d > 0.0)
    assert not s.flags.writeable and not d.flags.writeable
    assert np.all(np.any(s != 0.0, axis=0)), "all-zero columns must be dropped"
    block_of = np.empty(p.n_data, dtype=int)
    for k, b in enumerate(p.blocks()):
        block_of[b] = k
    column_blocks = []
    for j in range(s.shape[1]):
        rows = np.flatnonzero(s[:, j])
        assert block_of[rows[0]] == block_of[rows[-1]], f"column {j} crosses blocks"
        column_blocks.append(block_of[rows[0]])
    assert column_blocks == sorted(column_blocks), "columns are sorted by block"
    k_total = 0
    for b in p.blocks():
        s_b = p.block_systematics(b)
        n_b = b.stop - b.start
        assert s_b.shape[0] == n_b and not s_b.flags.writeable
        k_total += s_b.shape[1]
        c_b = p.covmat[b, b]
        rebuilt = np.diag(d[b]) + s_b @ s_b.T
        assert np.max(np.abs(c_b - rebuilt)) <= 1e-12 * np.max(np.abs(c_b))
    assert k_total == s.shape[1]  # every column belongs to exactly one block


@pytest.mark.parametrize("size", CLOSURE_SIZES)
def test_closure_factorisation(closure: Callable[..., Problem], size: str) -> None:
    p = closure(size)
    _check_factorisation(p)
    # level 1 keeps the same systematics (only the central values move)
    q = closure(size, level=1, seed=1)
    np.testing.assert_array_equal(q.systematics, p.systematics)
    np.testing.assert_array_equal(q.uncorrelated_variance, p.uncorrelated_variance)


def test_closure_shared_normalisation_column(closure: Callable[..., Problem]) -> None:
    p = closure("tiny")
    hera = p.blocks()[0]  # TOY_HERA_NC_F2P + TOY_HERA_CC_F2WP share a normalisation
    assert p.names[:2] == ("TOY_HERA_NC_F2P", "TOY_HERA_CC_F2WP")
    s_b = p.block_systematics(hera)
    n_nc = p.datasets[0].n_data
    spanning = [j for j in range(s_b.shape[1]) if s_b[:n_nc, j].any() and s_b[n_nc:, j].any()]
    assert len(spanning) == 1
    # the stat errors are what is left on the diagonal: rel 1%..4% of the truth, times <= 2.25
    assert np.all(np.sqrt(p.uncorrelated_variance) < 0.1 * p.truth)


@pytest.mark.parametrize(
    ("t0", "closure_level"), [(True, None), (False, None), (True, 1), (False, 0)]
)
def test_real_factorisation(t0: bool, closure_level: int | None) -> None:
    p = real_problem(t0=t0, closure_level=closure_level)
    _check_factorisation(p)
    hera = [b for b in p.blocks() if b.stop - b.start > 200 and p.block_systematics(b).size]
    assert any(p.block_systematics(b).shape[1] > 100 for b in hera)  # named HERA columns


def test_experimental_covariance_factorises() -> None:
    names = ["NMC_NC_NOTFIXED_P_EM-F2-HEPDATA", "HERA_CC_318GEV_EP-SIGMARED"]
    data = [load_real_dataset(n) for n in names]
    masks = [d.cut_mask() for d in data]
    t0 = [d.toy_prediction()[m] for d, m in zip(data, masks, strict=True)]
    for arg in (None, t0):
        covmat, s = experimental_covariance(data, masks, arg)
        assert s.shape[0] == covmat.shape[0]
        off = covmat - s @ s.T
        np.fill_diagonal(off, 0.0)
        assert np.max(np.abs(off)) <= 1e-12 * np.max(np.abs(covmat))


# --- hand-made problems ---------------------------------------------------------------------
def _a_b_c() -> tuple[tuple[Dataset, ...], np.ndarray, np.ndarray]:
    """A (3), B (2), C (4); column 0 spans A and C, column 1 is B's, column 2 is zero."""
    ds = (random_dataset("A", 3, 1), random_dataset("B", 2, 2), random_dataset("C", 4, 3))
    s = np.zeros((9, 4))
    s[[0, 1, 2, 5, 6, 7, 8], 0] = [0.5, 0.4, 0.3, 0.2, 0.1, 0.6, 0.7]  # A <-> C
    s[[3, 4], 1] = [0.8, 0.9]  # B
    s[[5, 6], 3] = [0.25, -0.5]  # C only
    d = np.arange(1.0, 10.0)
    return ds, np.diag(d) + s @ s.T, s


def test_reordering_moves_the_systematics_rows() -> None:
    ds, cov, s = _a_b_c()
    p = Problem(ds, cov, (), None, s)
    assert p.names == ("A", "C", "B")
    order = [0, 1, 2, 5, 6, 7, 8, 3, 4]
    # the zero column is gone; the B column (block 1) goes after the two of block 0
    np.testing.assert_array_equal(p.systematics, s[order][:, [0, 3, 1]])
    np.testing.assert_allclose(p.uncorrelated_variance, np.arange(1.0, 10.0)[order], rtol=1e-14)
    _check_factorisation(p)
    assert p.block_systematics(p.blocks()[0]).shape == (7, 2)
    assert p.block_systematics(p.blocks()[1]).shape == (2, 1)
    assert p.block_systematics(p.dataset_slices()[0]).shape == (3, 1)  # A: only the shared one


def test_select_restricts_rows_and_drops_zero_columns() -> None:
    ds, cov, s = _a_b_c()
    p = Problem(ds, cov, (), None, s)
    q = p.select(["C", "B"])
    assert q.names == ("C", "B") and q.systematics.shape == (6, 3)
    _check_factorisation(q)
    r = q.select(["B"])
    assert r.systematics.shape == (2, 1)
    _check_factorisation(r)
    # a block no column touches: (n_b, 0)
    t = Problem((ds[0],), np.diag([1.0, 2.0, 3.0]), systematics=np.zeros((3, 2)))
    assert t.systematics.shape == (3, 0)
    assert t.block_systematics(t.blocks()[0]).shape == (3, 0)
    np.testing.assert_array_equal(t.uncorrelated_variance, [1.0, 2.0, 3.0])


def test_select_keeps_closure_factorisation(closure: Callable[..., Problem]) -> None:
    p = closure("small")
    q = p.select(["TOY_HERA_CC_F2WP", "TOY_GLUON"])
    _check_factorisation(q)
    assert q.systematics.shape[1] < p.systematics.shape[1]


def test_systematics_do_not_change_the_fingerprint() -> None:
    ds, cov, s = _a_b_c()
    assert Problem(ds, cov, (), None, s).fingerprint() == Problem(ds, cov).fingerprint()


def test_without_systematics() -> None:
    ds, cov, _ = _a_b_c()
    p = Problem(ds, cov)
    assert p.systematics is None
    with pytest.raises(ValueError, match="no systematics"):
        _ = p.uncorrelated_variance
    with pytest.raises(ValueError, match="no systematics"):
        p.block_systematics(p.blocks()[0])
    assert p.select(["B"]).systematics is None


def test_validation_errors() -> None:
    ds, cov, s = _a_b_c()
    with pytest.raises(ValueError, match=r"systematics must be 2-d"):
        Problem(ds, cov, systematics=s[:, 0])
    with pytest.raises(ValueError, match=r"systematics must have shape \(9, K\)"):
        Problem(ds, cov, systematics=s[:8])
    bad = s.copy()
    bad[0, 1] = np.nan
    with pytest.raises(ValueError, match="systematics has non-finite entries"):
        Problem(ds, cov, systematics=bad)
    # inconsistent: a column scaled by 2 no longer reproduces the off-diagonal of covmat
    bad = s.copy()
    bad[:, 0] *= 2.0
    with pytest.raises(ValueError, match="inconsistent with covmat"):
        Problem(ds, cov, systematics=bad)
    # a column over A and B, which covmat does not correlate
    bad = s.copy()
    bad[3, 0] = 1e-3
    with pytest.raises(ValueError, match="nonzero in two covariance blocks"):
        Problem(ds, cov, systematics=bad)
    # a systematic larger than the variance: d <= 0 (off-diagonal still consistent)
    cov2 = cov.copy()
    cov2[3, 3] = s[3, 1] ** 2
    with pytest.raises(ValueError, match="uncorrelated variance .* must be > 0"):
        Problem(ds, cov2, systematics=s)
    with pytest.raises(ValueError, match="step 1"):
        Problem(ds, cov, systematics=s).block_systematics(slice(0, 9, 2))
