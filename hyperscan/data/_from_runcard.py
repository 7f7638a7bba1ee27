# SPDX-License-Identifier: GPL-3.0-or-later
"""The problem a runcard's ``data`` section asks for.

Here rather than in ``fit`` so that a coordinator (study creation, data fingerprints) builds
it without TensorFlow.
"""

from __future__ import annotations

from hyperscan.runcard import FitRuncard

from ._closure import closure_problem
from ._problem import Problem
from ._real import real_problem


def load_problem(runcard: FitRuncard) -> Problem:
    real, closure = runcard.data.real, runcard.data.closure
    if real is not None:
        problem = real_problem(
            [{"dataset": d.dataset, "variant": d.variant} for d in real.datasets],
            q2min=real.q2min,
            w2min=real.w2min,
            t0=real.t0,
            closure_level=None if real.closure is None else real.closure.level,
            closure_seed=0 if real.closure is None else real.closure.seed,
        )
    else:
        assert closure is not None  # the schema requires one of them
        problem = closure_problem(closure.size, level=closure.level, seed=closure.seed)
    if runcard.data.datasets != "all":
        problem = problem.select(list(runcard.data.datasets))
    return problem
