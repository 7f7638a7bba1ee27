# SPDX-License-Identifier: GPL-3.0-or-later
"""Replica pseudo-data and training/validation masks, reproducible per (seed, replica)."""

from __future__ import annotations

import zlib

import numpy as np

from ._problem import Problem

# Extra entropy word that separates the mask streams from the pseudo-data stream of the same
# (seed, replica). Not 0: SeedSequence pads entropy with zeros, so [s, r, 0] == [s, r].
_MASK_STREAM = 1


def _check_index(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {value!r}")
    return int(value)


def replica_data(
    problem: Problem, replica: int, seed: int, central: np.ndarray | None = None
) -> np.ndarray:
    """(N,) pseudo-data central + L xi of one replica, xi ~ N(0, 1).

    xi comes from ``np.random.default_rng(np.random.SeedSequence([seed, replica]))``, so a
    replica's data do not depend on which other replicas are fitted with it. ``central``
    (default the problem's) is the data it fluctuates: another level-1 fit's (level1_data).
    """
    seed = _check_index(seed, "seed")
    replica = _check_index(replica, "replica")
    rng = np.random.default_rng(np.random.SeedSequence([seed, replica]))
    xi = rng.standard_normal(problem.n_data)
    lower = problem.cholesky
    out = np.array(problem.central if central is None else central, dtype=np.float64)
    for b in problem.blocks():
        out[b] += lower[b, b] @ xi[b]
    return out


def training_mask(problem: Problem, replica: int, seed: int, fraction: float) -> np.ndarray:
    """(N,) bool, True for training points: per dataset floor(fraction * n_data) at random.

    n3fit's rule: a dataset too small for one training point (fraction * n_data < 1, a
    one-point dataset for instance) trains a point with probability ``fraction``, else only
    validates. Each dataset draws from its own stream SeedSequence([seed, replica, 1,
    crc32(name)]), so a dataset's mask is the same in any sub-problem (k-folds) and
    independent of the pseudo-data fluctuations of the same replica.
    """
    seed = _check_index(seed, "seed")
    replica = _check_index(replica, "replica")
    fraction = float(fraction)
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"training fraction must be in (0, 1], got {fraction}")
    mask = np.zeros(problem.n_data, dtype=bool)
    for dataset, s in zip(problem.datasets, problem.dataset_slices(), strict=True):
        n = dataset.n_data
        if fraction == 1.0:
            mask[s] = True
            continue
        key = zlib.crc32(dataset.name.encode("utf-8"))
        rng = np.random.default_rng(np.random.SeedSequence([seed, replica, _MASK_STREAM, key]))
        k = int(fraction * n)
        if k == 0:
            k = int(rng.random() < fraction)
        local = np.zeros(n, dtype=bool)
        local[rng.permutation(n)[:k]] = True
        mask[s] = local
    return mask
