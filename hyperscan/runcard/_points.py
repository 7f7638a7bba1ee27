# SPDX-License-Identifier: GPL-3.0-or-later
"""A point of the search space: the parameters it has, how a trial draws them, and the settings
they give a base runcard.

Drawing takes any object with Optuna's ``suggest_*`` methods, so this package needs no Optuna.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from ._base import _number
from ._distributions import Choices, Range
from ._fit import FitRuncard
from ._load import _problems

__all__ = ["Dimension", "NotInSpace", "with_settings"]


class Trial(Protocol):
    """What :meth:`Space.suggest` needs of a trial: Optuna's ``suggest_*`` methods."""

    def suggest_float(
        self, name: str, low: float, high: float, *, step: float | None = None, log: bool = False
    ) -> float: ...

    def suggest_int(
        self, name: str, low: int, high: int, *, step: int = 1, log: bool = False
    ) -> int: ...

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any: ...


class NotInSpace(ValueError):
    """A trial's parameters are not a point of the runcard's space: another study's trial, or
    one ended outside a worker before it drew its values."""


@dataclass(frozen=True)
class Dimension:
    """One parameter of the space, as Optuna stores it."""

    name: str
    distribution: Range | Choices
    #: Drawn only when the parameter named first took one of the values that follow.
    when: tuple[str, tuple[Any, ...]] | None = None

    def drawn_with(self, params: Mapping[str, Any]) -> bool:
        """Whether a point with these (earlier) parameters has this one."""
        if self.when is None:
            return True
        parent, values = self.when
        return parent in params and params[parent] in values

    def draw(self, trial: Trial) -> Any:
        dist = self.distribution
        if isinstance(dist, Choices):
            return trial.suggest_categorical(self.name, list(dist.choices))
        if dist.is_int:
            step = 1 if dist.step is None else int(dist.step)
            return trial.suggest_int(
                self.name, int(dist.low), int(dist.high), step=step, log=dist.log
            )
        return trial.suggest_float(self.name, dist.low, dist.high, step=dist.step, log=dist.log)


def _value(dist: Range | Choices, value: Any) -> Any:
    """A stored value as the fit schema wants it: 500.0 back to 500 for an integer setting."""
    if isinstance(dist, Range) and dist.is_int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: Settings of which exactly one is set: a searched value for one clears the other.
_EXCLUSIVE = {"positivity.max": "positivity.multiplier", "positivity.multiplier": "positivity.max"}


def with_settings(fit: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of fit-runcard data with each dotted-path setting replaced.

    A value for one of two exclusive settings (``positivity.max`` / ``multiplier``) clears the
    other unless both are given, so searching the multiplier works with the default ``max``.
    """
    data = copy.deepcopy(dict(fit))
    settings = dict(settings)
    for path, partner in _EXCLUSIVE.items():
        if settings.get(path) is not None and partner not in settings:
            settings[partner] = None
    for path, value in settings.items():
        *sections, key = path.split(".")
        node = data
        for section in sections:
            node = node.setdefault(section, {})
        node[key] = value
    return data


def _show(value: Any) -> str:
    """A value as written in YAML: 1e-05, 'tanh', null, true."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    return _number(value)


def _shown(settings: Mapping[str, Any]) -> str:
    return " and ".join(f"{path} = {_show(value)}" for path, value in settings.items())


def _invalid_because(base: dict[str, Any], settings: Mapping[str, Any]) -> str | None:
    """Why the base runcard with ``settings`` is not a valid fit runcard; None if it is."""
    try:
        FitRuncard.model_validate(with_settings(base, settings))
    except ValidationError as err:
        return "; ".join(
            f"{where}: {what}" if where else what for where, what in _problems(FitRuncard, err)
        )
    return None


#: Joint draws from the space, tried when a study is created: a rule spanning fields (say
#: positivity.max >= initial) may hold for each searched value alone and fail for nearly every
#: combination, which would trash nearly every trial. Seeded, so a runcard's verdict never
#: changes; a space whose valid share is 2% passes with probability 1 - 0.98**256 > 99.4%.
JOINT_DRAWS = 256


def _random_value(dist: Range | Choices, rng: random.Random) -> Any:
    if isinstance(dist, Choices):
        return rng.choice(dist.choices)
    if dist.log:
        value = math.exp(rng.uniform(math.log(dist.low), math.log(dist.high)))
    else:
        value = rng.uniform(dist.low, dist.high)
    if dist.step is not None:
        value = dist.low + round((value - dist.low) / dist.step) * dist.step
    return round(value) if dist.is_int else min(max(value, dist.low), dist.high)


def _ends(dist: Range | Choices) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """The values of a distribution worth trying on the base runcard, with their locations."""
    if isinstance(dist, Choices):
        yield from ((("choices", i), choice) for i, choice in enumerate(dist.choices))
    else:
        yield ("low",), dist.low
        yield ("high",), dist.high
