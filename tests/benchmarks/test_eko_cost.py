# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/eko_cost.py compares sets at a scale: the set's scale nearest to the one asked."""

from __future__ import annotations

import numpy as np
from _scripts import load_benchmark


def test_the_values_compared_are_those_of_the_nearest_scale():
    at_scale = load_benchmark("eko_cost").at_scale
    values = np.arange(2 * 3 * 14 * 5, dtype=float).reshape(2, 3, 14, 5)
    blocks = {
        4: (np.array([2.72, 9.0, 20.0]), values),
        5: (np.array([30.0**2, 99.0**2]), values[:, :2] + 1),
    }
    np.testing.assert_array_equal(at_scale(blocks, 100.0), values[:, 1] + 1)  # Q = 99 GeV
    np.testing.assert_array_equal(at_scale(blocks, 1.65), values[:, 0])  # Q = 1.649…
    np.testing.assert_array_equal(at_scale(blocks, 4.0), values[:, 2])  # Q = 4.47…
