# SPDX-License-Identifier: GPL-3.0-or-later
"""A study's noise floor as `hyperscan study noise` recorded it, read without TensorFlow: by
`study status`, `export` and the report."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

from hyperscan.scan._study import NOISE_ATTR, ranked


@dataclass(frozen=True)
class NoiseFloor:
    """A study's noise floor: the spreads of a trial's value, relative to it (a standard
    deviation over its refits, averaged over the trials measured)."""

    rounding: float
    replicas: float
    trials: tuple[int, ...]  # the trials measured

    @classmethod
    def of(
        cls,
        measured: Sequence[tuple[float, Sequence[float], Sequence[float]]],
        trials: tuple[int, ...],
    ) -> NoiseFloor:
        """From each trial's value, its refits in other layouts and with fresh replicas."""

        def spread(values: Sequence[float], value: float) -> float:
            kept = np.array([v for v in values if v is not None and np.isfinite(v)])
            return float(np.std(kept, ddof=1) / abs(value)) if kept.size > 1 else math.nan

        def mean(spreads: list[float]) -> float:
            finite = [s for s in spreads if np.isfinite(s)]
            return float(np.mean(finite)) if finite else math.nan

        rounding = mean([spread((value, *again), value) for value, again, _ in measured])
        replicas = mean([spread(fresh, value) for value, _, fresh in measured])
        return cls(rounding, replicas, trials)

    @classmethod
    def stored(cls, attrs: Mapping[str, Any]) -> NoiseFloor | None:
        """The floor `study noise` recorded in a study's attributes, or None."""
        record = attrs.get(NOISE_ATTR)
        if not record:
            return None
        measured = [
            (trial["value"], trial["rounding"], trial["replicas"])
            for trial in record["trials"].values()
        ]
        return cls.of(measured, tuple(int(number) for number in record["trials"]))

    def ties(self, trials: list[optuna.trial.FrozenTrial], minimize: bool) -> list[int]:
        """The complete trials whose value is within the replicas' spread of the best one's,
        best first (the best included)."""
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        if not complete or not np.isfinite(self.replicas):
            return []
        best, *_ = order = ranked(complete, minimize)
        margin = self.replicas * abs(best.value)
        sign = 1 if minimize else -1
        return [t.number for t in order if sign * (t.value - best.value) <= margin]

    def text(self) -> str:
        """The floor in words, for status, export and the report."""
        return (
            f"rounding ±{self.rounding:.2%}, replicas ±{self.replicas:.1%} of a trial's value "
            f"(trials {', '.join(map(str, self.trials))}, `hyperscan study noise`)"
        )
