# SPDX-License-Identifier: GPL-3.0-or-later
"""The scales of an LHAPDF set as n3fit 4.1.5's evolven3fit lays them out.

The same Q grid, not one of our own, so that an EKO made for n3fit's fits serves hyperscan's and
the two sets agree point for point: 6 points from 1 GeV to the charm threshold, then 50 from Q0
to 100 TeV, uniform in ln ln(Q²/Λ²) (Λ² = 0.0625 GeV²) within each stretch between thresholds.
A scale that is a threshold appears twice, once for each number of flavours.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

Q_MIN, Q_MAX = 1.0, 1e5
POINTS_ABOVE_Q0, POINTS_BELOW_CHARM = 50, 6
_LAMBDA2 = 0.0625
#: eko's rule for a scale on a threshold: the flavour numbers a hair below and above it.
_THRESHOLD_EPSILON = 1e-4


def _loglog(q2: np.ndarray | float) -> np.ndarray:
    return np.log(np.log(np.asarray(q2) / _LAMBDA2))


def _from_loglog(t: np.ndarray) -> np.ndarray:
    return _LAMBDA2 * np.exp(np.exp(t))


def thresholds(theory: Mapping) -> tuple[float, float, float]:
    """The matching scales (GeV²) of c, b and t: mass × ratio, squared; a flavour above the
    card's MaxNfPdf has none (infinite)."""
    max_nf = theory["MaxNfPdf"]
    return (
        (theory["mc"] * theory["kcThr"]) ** 2,
        (theory["mb"] * theory["kbThr"]) ** 2 if max_nf >= 5 else np.inf,
        (theory["mt"] * theory["ktThr"]) ** 2 if max_nf >= 6 else np.inf,
    )


def q2_grid(theory: Mapping) -> np.ndarray:
    """The set's Q² values (GeV²), ascending, thresholds once."""
    q0_2, (charm, bottom, _) = theory["Q0"] ** 2, thresholds(theory)
    if theory["Q0"] < Q_MIN:
        raise ValueError(f"Q0 = {theory['Q0']} GeV is below the grid's {Q_MIN} GeV")
    below = _from_loglog(np.linspace(_loglog(Q_MIN**2), _loglog(charm), POINTS_BELOW_CHARM))
    # Points uniform over Q0² … Q_MAX², shared out between the stretches below and above the
    # bottom threshold, each then laid out uniformly between its own ends.
    uniform = _from_loglog(np.linspace(_loglog(q0_2), _loglog(Q_MAX**2), POINTS_ABOVE_Q0))
    under_bottom = int(np.sum(uniform < bottom))
    first = _from_loglog(np.linspace(_loglog(q0_2), _loglog(bottom), under_bottom))[:-1]
    second = _from_loglog(
        np.linspace(_loglog(bottom), _loglog(Q_MAX**2), POINTS_ABOVE_Q0 - under_bottom)
    )
    return np.concatenate([below, first, second])


def evolution_points(theory: Mapping) -> list[tuple[float, int]]:
    """(Q in GeV, number of flavours) of every scale the EKO evolves to; a threshold twice."""
    matching = np.array(thresholds(theory))

    def flavours(q2: float) -> int:
        return 3 + int(np.sum(matching < q2))

    points = []
    for q2 in q2_grid(theory):
        q = float(np.sqrt(q2))
        low, high = flavours(q2 - _THRESHOLD_EPSILON), flavours(q2 + _THRESHOLD_EPSILON)
        points += [(q, low), (q, high)] if low != high else [(q, low)]
    return points
