# SPDX-License-Identifier: GPL-3.0-or-later
"""Replica pseudo-data and training masks: reproducible per replica, right statistics."""

from __future__ import annotations

import numpy as np
import pytest

from hyperscan.data import replica_data, training_mask, untrained_members


def test_replica_data_is_per_replica_reproducible(closure):
    p = closure("small", level=1, seed=2)
    alone = replica_data(p, replica=7, seed=11)
    batch = {r: replica_data(p, replica=r, seed=11) for r in range(12)}
    np.testing.assert_array_equal(batch[7], alone)
    assert alone.shape == (p.n_data,) and alone.dtype == np.float64
    assert not np.allclose(batch[3], batch[4])
    assert not np.allclose(replica_data(p, 7, seed=12), alone)
    # exactly the documented stream: central + L xi, xi from SeedSequence([seed, replica])
    xi = np.random.default_rng(np.random.SeedSequence([11, 7])).standard_normal(p.n_data)
    np.testing.assert_allclose(alone, p.central + p.cholesky @ xi, rtol=1e-12, atol=1e-14)


def test_replica_fluctuations_have_the_covariance(closure):
    p = closure("tiny")
    n_rep = 3000
    deltas = np.stack([replica_data(p, r, seed=5) for r in range(n_rep)]) - p.central
    white = np.linalg.solve(p.cholesky, deltas.T).T  # should be N(0, 1), independent
    assert np.max(np.abs(white.mean(axis=0))) < 0.1
    np.testing.assert_allclose(np.cov(white.T), np.eye(p.n_data), atol=0.12)
    # and in data space, relative to the diagonal
    emp = np.cov(deltas.T)
    sd = np.sqrt(np.diag(p.covmat))
    np.testing.assert_allclose(emp / np.outer(sd, sd), p.covmat / np.outer(sd, sd), atol=0.12)


@pytest.mark.parametrize("fraction", [0.75, 0.5, 0.99])
def test_training_fraction_per_dataset(closure, fraction):
    """n3fit's count: floor(fraction · n) training points per dataset."""
    p = closure("small")
    mask = training_mask(p, replica=3, seed=1, fraction=fraction)
    assert mask.dtype == bool and mask.shape == (p.n_data,)
    for d, s in zip(p.datasets, p.dataset_slices(), strict=True):
        assert mask[s].sum() == int(fraction * d.n_data)


def test_a_dataset_too_small_for_a_training_point_trains_one_with_that_probability(closure):
    """n3fit's rule for fraction · n < 1 (one-point datasets): one point with probability
    fraction, else the dataset only validates."""
    p = closure("tiny")
    fraction = 0.05  # < 1/18: no dataset of the tiny problem has a whole training point
    counts = np.array(
        [
            [training_mask(p, r, 0, fraction)[s].sum() for s in p.dataset_slices()]
            for r in range(2000)
        ]
    )
    assert set(np.unique(counts)) == {0, 1}
    assert abs(counts.mean() - fraction) < 0.015  # 8000 draws: σ ≈ 0.0024


def test_training_mask_reproducible_and_random(closure):
    p = closure("small")
    m = training_mask(p, 3, 1, 0.75)
    np.testing.assert_array_equal(m, training_mask(p, 3, 1, 0.75))
    assert not np.array_equal(m, training_mask(p, 4, 1, 0.75))
    assert not np.array_equal(m, training_mask(p, 3, 2, 0.75))
    assert training_mask(p, 3, 1, 1.0).all()
    # a dataset's mask does not depend on which other datasets are in the problem (k-folds)
    sub = p.select(p.names[2:5])
    index = np.r_[tuple(p.dataset_slices()[2:5])]
    np.testing.assert_array_equal(training_mask(sub, 3, 1, 0.75), m[index])
    # points of a dataset are picked uniformly: each point trains ~75% of replicas
    freq = np.mean([training_mask(p, r, 0, 0.75) for r in range(400)], axis=0)
    assert np.all(np.abs(freq - 0.75) < 0.12)


def test_mask_is_independent_of_the_data_stream(closure):
    """Mask and pseudo-data of one replica come from different streams: no point is both more
    often in validation and more often shifted up."""
    p = closure("tiny")
    masks = np.array([training_mask(p, r, 0, 0.5) for r in range(1500)])
    xi = np.array(
        [
            np.random.default_rng(np.random.SeedSequence([0, r])).standard_normal(p.n_data)
            for r in range(1500)
        ]
    )
    corr = [np.corrcoef(masks[:, i], xi[:, i])[0, 1] for i in range(p.n_data)]
    assert np.max(np.abs(corr)) < 0.15


def test_bad_arguments(closure):
    p = closure("tiny")
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError):
            replica_data(p, bad, 0)
        with pytest.raises(ValueError):
            training_mask(p, 0, bad, 0.75)
    for fraction in (0.0, 1.01, -0.2):
        with pytest.raises(ValueError):
            training_mask(p, 0, 0, fraction)


def test_members_left_without_training_points_are_named(closure):
    """Below one point per dataset, a member trains only on the points its draws give it,
    perhaps none: it would take no gradient and end vetoed, for no reason a message gave."""
    p = closure("tiny")  # datasets of 14–18 points
    fraction = 0.05
    expected = [
        r
        for r in range(1, 41)
        if not any(training_mask(p, r, 2, fraction)[s].any() for s in p.dataset_slices())
    ]
    assert 0 < len(expected) < 40  # some draw a point, some do not
    ((key, message),) = untrained_members(p, range(1, 41), [], 2, fraction)
    assert key == "data.training_fraction"
    named = ", ".join(f"replica {r}" for r in expected[:3])
    assert message.startswith(f"0.05 leaves {named} and {len(expected) - 3} more no training")
    assert untrained_members(p, range(1, 41), [], 2, 0.1) == []  # 1 point per dataset
    # A fold holding out all but one dataset: only that dataset's draw counts.
    folds = [[d.name for d in p.datasets[1:]]]
    kept = p.dataset_slices()[0]
    alone = [r for r in range(1, 41) if not training_mask(p, r, 2, fraction)[kept].any()]
    ((_, message),) = untrained_members(p, range(1, 41), folds, 2, fraction)
    assert f"replica {alone[0]} of fold 0" in message and f"{len(alone) - 3} more" in message
