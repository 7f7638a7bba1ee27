# SPDX-License-Identifier: GPL-3.0-or-later
"""The built-in closure problems: shapes, determinism, covariance, coverage of the flavours."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from hyperscan.data import (
    CLOSURE_SIZES,
    FIT_BASIS,
    FK_BASIS,
    STANDARD_XGRID,
    closure_problem,
    fit_to_fk_rotation,
    toy_pdf,
)

# (datasets, points) per preset: what the tests and benchmarks rely on
EXPECTED_SIZES = {"tiny": (4, 60), "small": (8, 300), "medium": (20, 1000), "nnpdf40": (82, 4618)}
ZERO_ROWS = [FK_BASIS.index(n) for n in ("photon", "V24", "V35", "T24", "T35")]


@pytest.mark.parametrize("size", CLOSURE_SIZES)
def test_shapes_and_dtypes(closure, size):
    p = closure(size)
    n_sets, n_points = EXPECTED_SIZES[size]
    assert len(p.datasets) == n_sets and p.n_data == n_points
    assert p.covmat.shape == (n_points, n_points) and p.covmat.dtype == np.float64
    assert p.central.shape == (n_points,) and p.truth.shape == (n_points,)
    for d in p.datasets:
        assert d.table.fk.dtype == np.float64 and d.table.fk.shape == (d.n_data, 14, d.xgrid.size)
        assert d.kinematics.shape == (d.n_data, 3)
        assert 20 <= d.xgrid.size <= 50
        # a contiguous slice of the standard grid, up to x = 1, a few nodes below the data
        start = int(np.searchsorted(STANDARD_XGRID, d.xgrid[0]))
        np.testing.assert_array_equal(d.xgrid, STANDARD_XGRID[start:])
        x, q2, y = d.kinematics.T
        assert start == 0 or np.searchsorted(d.xgrid, x.min()) == 7
        assert np.all((x > d.xgrid[0]) & (x < 1.0)) and np.all(np.diff(x) >= 0)
        assert np.all((q2 >= 2.0) & (q2 <= 1000.0)) and np.all(np.isnan(y))
        assert np.all(d.table.fk[:, ZERO_ROWS, :] == 0.0)
        assert d.process in ("DIS_NC", "DIS_CC", "TOY_GLUON")
    assert len(p.positivity) >= 4
    for pos in p.positivity:
        assert pos.table.fk.shape == (20, 14, pos.xgrid.size)
    assert len({d.name for d in p.datasets}) == n_sets


def test_arrays_are_read_only(closure):
    p = closure("tiny")
    for a in (p.covmat, p.central, p.truth, p.datasets[0].table.fk, p.positivity[0].table.fk):
        with pytest.raises(ValueError):
            a[0] = 1.0


@pytest.mark.parametrize("level", [0, 1])
def test_deterministic(level):
    a = closure_problem("small", level=level, seed=4)
    b = closure_problem("small", level=level, seed=4)
    np.testing.assert_array_equal(a.covmat, b.covmat)
    np.testing.assert_array_equal(a.central, b.central)
    for da, db in zip(a.datasets, b.datasets, strict=True):
        np.testing.assert_array_equal(da.table.fk, db.table.fk)
        np.testing.assert_array_equal(da.kinematics, db.kinematics)
    assert a.fingerprint() == b.fingerprint()


# Golden values: the closure data must be the same bytes on every machine (workers compare
# fingerprints). If you change the closure data on purpose, update these.
GOLDEN = {
    ("tiny", 0, 0): "d7af5dfcbe638669125ea32f6116f274a1c4a45d543b68c2c8d96aef31e8b348",
    ("tiny", 1, 3): "aec17d56a2133a53740226f30dc70f34c90f31ea86d213618f5e18b0540923c6",
    ("small", 0, 0): "952ffe54760f20383efb17f2f3c2cb77a91d27ca2c23f5576eed7fada75ce091",
    ("nnpdf40", 0, 0): "b59fe5760f2b5a76174e641a65aa0ede7dbd85af66779dc408e5b9c5e81fe9a4",
}


@pytest.mark.parametrize(("size", "level", "seed"), sorted(GOLDEN))
def test_golden_fingerprint(closure, size, level, seed):
    assert closure(size, level=level, seed=seed).fingerprint() == GOLDEN[size, level, seed]


def test_same_bytes_with_other_cpu_kernels(closure):
    """Rebuild in a subprocess with numpy's SIMD dispatch and OpenBLAS' kernels forced down
    (as on an older CPU): np.log, np.power and LAPACK change their last bits there, the closure
    data must not (they avoid all three)."""
    from numpy._core import _multiarray_umath as umath

    features = [f for f in umath.__cpu_dispatch__ if umath.__cpu_features__.get(f)]
    env = dict(os.environ, OPENBLAS_CORETYPE="Sandybridge", OPENBLAS_NUM_THREADS="1")
    if features:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(features)
    code = (
        "from hyperscan.data import closure_problem as c; "
        "print(c('tiny').fingerprint(), c('small', level=1, seed=2).fingerprint())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [
        closure("tiny").fingerprint(),
        closure("small", level=1, seed=2).fingerprint(),
    ]


def test_level0_central_is_truth_and_truth_is_fk_times_toy(closure):
    r = fit_to_fk_rotation()
    for size in ("tiny", "small"):
        p = closure(size)
        np.testing.assert_array_equal(p.central, p.truth)
        for d, s in zip(p.datasets, p.dataset_slices(), strict=True):
            expected = np.einsum("nfa,fa->n", d.table.fk, r @ toy_pdf(d.xgrid).T)
            np.testing.assert_allclose(p.truth[s], expected, rtol=1e-13)
            assert np.all(p.truth[s] > 0)


def test_level1_is_one_covariance_fluctuation(closure):
    p0, p1 = closure("small"), closure("small", level=1, seed=0)
    np.testing.assert_array_equal(p0.covmat, p1.covmat)
    np.testing.assert_array_equal(p0.truth, p1.truth)
    delta = p1.central - p1.truth
    # exactly L eta with eta from default_rng(seed)
    eta = np.random.default_rng(0).standard_normal(p1.n_data)
    np.testing.assert_allclose(delta, p1.cholesky @ eta, rtol=1e-9, atol=1e-13)
    white = np.linalg.solve(p1.cholesky, delta)
    assert 0.7 < white @ white / p1.n_data < 1.3
    other = closure_problem("small", level=1, seed=1)
    assert not np.allclose(other.central, p1.central)
    assert other.fingerprint() != p1.fingerprint()


@pytest.mark.parametrize("size", ["tiny", "small", "medium"])
def test_covariance_symmetric_positive_definite(closure, size):
    p = closure(size)
    np.testing.assert_array_equal(p.covmat, p.covmat.T)
    eig = np.linalg.eigvalsh(p.covmat)
    assert eig.min() > 0
    # realistic conditioning of the correlation matrix (real kit: 1e3..1e8 for the covmat)
    sd = np.sqrt(np.diag(p.covmat))
    assert np.linalg.cond(p.covmat / np.outer(sd, sd)) < 1e4
    # relative uncertainties of a few per cent
    rel = sd / p.truth
    assert rel.min() > 0.01 and rel.max() < 0.15


@pytest.mark.parametrize("size", CLOSURE_SIZES)
def test_blocks_cover_and_do_not_leak(closure, size):
    p = closure(size)
    blocks = p.blocks()
    assert blocks[0].start == 0 and blocks[-1].stop == p.n_data
    assert all(a.stop == b.start for a, b in zip(blocks[:-1], blocks[1:], strict=True))
    inside = np.zeros(p.covmat.shape, dtype=bool)
    for b in blocks:
        inside[b, b] = True
    assert not np.any(p.covmat[~inside])
    starts = {s.start for s in p.dataset_slices()}
    assert all(b.start in starts for b in blocks)  # blocks are runs of whole datasets
    spans = [sum(b.start <= s.start < b.stop for s in p.dataset_slices()) for b in blocks]
    assert max(spans) >= 2, "some datasets must be correlated with each other"
    # the cached factor is exact and block diagonal
    lower = p.cholesky
    if p.n_data <= 1000:
        np.testing.assert_allclose(lower @ lower.T, p.covmat, rtol=0, atol=1e-12 * p.covmat.max())
    assert not np.any(lower[~inside]) and np.all(np.triu(lower, 1) == 0)


@pytest.mark.parametrize("size", CLOSURE_SIZES)
def test_every_fit_flavour_is_constrained(closure, size):
    p = closure(size)
    r = fit_to_fk_rotation()
    rows = np.concatenate([np.einsum("nfa,fk->nk", d.table.fk, r) for d in p.datasets])
    weight = np.abs(rows).sum(axis=0)
    missing = [FIT_BASIS[k] for k in np.flatnonzero(weight == 0)]
    assert not missing
    if size != "tiny":  # every combination, not just every flavour
        assert np.linalg.matrix_rank(rows) == len(FIT_BASIS)


def test_positivity_holds_for_the_truth(closure):
    r = fit_to_fk_rotation()
    for size in ("small", "nnpdf40"):
        for pos in closure(size).positivity:
            pred = pos.predictions(r @ toy_pdf(pos.xgrid).T)
            assert pred.shape == (pos.n_points,) and np.all(pred >= 0), pos.name
            x = np.einsum("na,a->n", np.abs(pos.table.fk).sum(axis=1), pos.xgrid)
            assert x.min() < 1e-6 and x.max() < 0.9


def test_bad_arguments():
    with pytest.raises(ValueError, match="huge"):
        closure_problem("huge")
    with pytest.raises(ValueError, match="level"):
        closure_problem("tiny", level=2)
    with pytest.raises(ValueError, match="seed"):
        closure_problem("tiny", level=1, seed=-1)
