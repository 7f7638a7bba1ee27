# SPDX-License-Identifier: GPL-3.0-or-later
"""The search space of a scan (``scan.space``): one object that validates it, draws its points
and turns a point into the fit runcard of a trial.

Parameter names are flat and stable, because they are what Optuna stores and what the sampler
learns from: ``optimizer``; ``<optimizer>.learning_rate`` and ``<optimizer>.clipnorm`` (the
optimiser in the name keeps one distribution per optimiser, so TPE does not mix Adam's learning
rates with SGD's); ``layers`` and ``units_1`` .. ``units_<layers>``; ``activation``; and each
dotted path of ``scan.space.parameters`` as itself. :meth:`Space.apply` needs only the
parameters a trial stored, so a finished trial is exported without drawing anything again.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from ._architecture import Activation
from ._base import Str, _Section, _unique, fail_at
from ._distributions import Choices, Distribution, Range
from ._fit import FitRuncard
from ._load import RuncardError, runcard_from_dict
from ._points import (
    JOINT_DRAWS,
    Dimension,
    NotInSpace,
    Trial,
    _ends,
    _invalid_because,
    _random_value,
    _shown,
    _value,
    with_settings,
)
from ._searchable import _LAYERS, _UNITS, _checked, _not_searchable, _target
from ._training import OptimizerName

__all__ = ["OptimizerSpace", "Space"]

#: Settings of an optimiser sub-space, each an Optuna parameter ``<optimizer>.<key>``.
OPTIMIZER_KEYS: tuple[str, ...] = ("learning_rate", "clipnorm")


class OptimizerSpace(_Section):
    """What one optimiser of the space draws; a key left out keeps the base runcard's value.

    Here ``clipnorm: null`` means "not searched"; to draw "no clipping", list it as a choice:
    ``clipnorm: {choices: [null, 1.0e-3]}``.
    """

    learning_rate: Distribution | None = None
    """RANGE or choices of this optimiser's learning rate; left out: the base runcard's."""
    clipnorm: Distribution | None = None
    """RANGE or choices of this optimiser's clipnorm; left out (or null): the base runcard's. To
    draw "no clipping", list null as a choice: `{choices: [null, 1.0e-3]}`.
    """


class Space(_Section):
    """The search space (``scan.space``): what a trial draws, and how a point becomes the fit
    runcard of a trial. Every entry is optional, but at least one must be given."""

    optimizer: Annotated[dict[OptimizerName, OptimizerSpace], Field(min_length=1)] | None = None
    """One sub-space per optimiser, `{adam: {learning_rate: RANGE, clipnorm: RANGE}, nadam: {...}}`:
    the optimiser is a choice, each with its own ranges.
    """
    layers: Range | None = None
    """RANGE of the number of hidden layers (integers); requires `units`."""
    units: Range | None = None
    """RANGE of the units of each hidden layer, drawn independently per layer (one parameter per
    layer); requires `layers`.
    """
    activation: (
        Annotated[tuple[Activation, ...], Field(min_length=1), AfterValidator(_unique)] | None
    ) = None
    """A list of activations to choose from, shared by all hidden layers."""
    parameters: dict[Str, Distribution] = Field(default_factory=dict)
    """Any other single-valued fit setting, by dotted path, with its RANGE or choices: `epochs:
    {low: 500, high: 2000, step: 100}`, `positivity.initial: {low: 1, high: 1000, log: true}`,
    `architecture.initializer: {choices: [...]}`.
    """

    @field_validator("optimizer")
    @classmethod
    def _optimizer_ranges(
        cls, value: dict[str, OptimizerSpace] | None
    ) -> dict[str, OptimizerSpace] | None:
        if value is None:
            return value
        problems: list[tuple[tuple[Any, ...], str]] = []
        checked = {}
        for name, sub in value.items():
            update = {}
            for key in OPTIMIZER_KEYS:
                dist = getattr(sub, key)
                if dist is not None:
                    update[key], found = _checked(dist, _target(f"optimizer.{key}"))
                    problems += [((name, key, *loc), message) for loc, message in found]
            checked[name] = sub.model_copy(update=update)
        fail_at(problems, value)
        return checked

    @field_validator("layers", "units")
    @classmethod
    def _within_bounds(cls, value: Range | None, info: ValidationInfo) -> Range | None:
        if value is not None:
            bounds = _LAYERS if info.field_name == "layers" else _UNITS
            fail_at(_checked(value, bounds)[1], value)
        return value

    @field_validator("parameters")
    @classmethod
    def _searchable(cls, value: dict[str, Range | Choices]) -> dict[str, Range | Choices]:
        problems: list[tuple[tuple[Any, ...], str]] = []
        checked = {}
        for path, dist in value.items():
            reason = _not_searchable(path)
            if reason is not None:
                problems.append(((path,), reason))
                continue
            checked[path], found = _checked(dist, _target(path))
            problems += [((path, *loc), message) for loc, message in found]
        fail_at(problems, value)
        return checked

    @model_validator(mode="after")
    def _complete(self) -> Space:
        problems: list[tuple[tuple[Any, ...], str]] = []
        if not (self.optimizer or self.layers or self.units or self.activation or self.parameters):
            problems.append(
                (
                    (),
                    "the search space is empty: give at least one of 'optimizer', "
                    "'layers' with 'units', 'activation' or 'parameters'",
                )
            )
        if self.units is not None and self.layers is None:
            problems.append(
                (("units",), "'units' needs 'layers' (the number of hidden layers to draw)")
            )
        if self.layers is not None and self.units is None:
            problems.append(
                (("layers",), "'layers' needs 'units' (the range of units of each layer)")
            )
        if self.optimizer:
            for path in self.parameters:
                if path.startswith("optimizer."):
                    problems.append(
                        (
                            ("parameters", path),
                            f"'{path}' is searched under 'scan.space.optimizer' when that is "
                            "given: put its range in the sub-space of each optimizer there",
                        )
                    )
        fail_at(problems, self)
        return self

    @property
    def dimensions(self) -> tuple[Dimension, ...]:
        """The parameters of the space, in the order a trial draws them."""
        found: list[Dimension] = []
        if self.optimizer:
            found.append(Dimension("optimizer", Choices(choices=tuple(self.optimizer))))
            for name, sub in self.optimizer.items():
                for key in OPTIMIZER_KEYS:
                    dist = getattr(sub, key)
                    if dist is not None:
                        found.append(Dimension(f"{name}.{key}", dist, ("optimizer", (name,))))
        if self.layers is not None and self.units is not None:
            found.append(Dimension("layers", self.layers))
            step = 1 if self.layers.step is None else int(self.layers.step)
            counts = range(int(self.layers.low), int(self.layers.high) + 1, step)
            for k in range(1, int(self.layers.high) + 1):
                deep = tuple(count for count in counts if count >= k)
                found.append(Dimension(f"units_{k}", self.units, ("layers", deep)))
        if self.activation is not None:
            found.append(Dimension("activation", Choices(choices=self.activation)))
        found += [Dimension(path, dist) for path, dist in self.parameters.items()]
        return tuple(found)

    def suggest(self, trial: Trial) -> dict[str, Any]:
        """Draw one point of the space; returns the parameters (Optuna's ``trial.params``)."""
        params: dict[str, Any] = {}
        for dimension in self.dimensions:
            if dimension.drawn_with(params):
                params[dimension.name] = dimension.draw(trial)
        return params

    def widest(self, base: FitRuncard) -> list[FitRuncard]:
        """Trial runcards that, between them, have the most hidden layers and units of the
        space with each optimiser and each activation it draws: a batch of this space's
        trials that makes room for them up front never has to be rebuilt wider
        (fit/_slots.py). Every other parameter at its low end or first choice."""
        optimizers = tuple(self.optimizer or ()) or (None,)
        activations = self.activation or (None,)
        cards = []
        for optimizer, activation in itertools.product(optimizers, activations):
            params: dict[str, Any] = {}
            for dimension in self.dimensions:
                if not dimension.drawn_with(params):
                    continue
                dist = dimension.distribution
                name = dimension.name
                if name == "optimizer":
                    params[name] = optimizer
                elif name == "activation":
                    params[name] = activation
                elif name == "layers" or name.startswith("units_"):
                    params[name] = _value(dist, dist.high)
                else:
                    params[name] = _value(
                        dist, dist.choices[0] if isinstance(dist, Choices) else dist.low
                    )
            with contextlib.suppress(RuncardError):  # a combination no trial can draw
                cards.append(self.apply(base, params))
        return cards

    def _settings(self, base: FitRuncard, params: Mapping[str, Any]) -> dict[str, Any]:
        """The dotted-path settings that ``params`` fix on ``base``; :class:`NotInSpace` when
        they are not a point of this space."""
        dimensions = {dimension.name: dimension for dimension in self.dimensions}
        values = {
            name: _value(dimensions[name].distribution, value) if name in dimensions else value
            for name, value in params.items()
        }
        settings: dict[str, Any] = {}
        problems: list[str] = []
        name = values.get("optimizer")
        if self.optimizer and name in self.optimizer:
            settings["optimizer.name"] = name
            for key in OPTIMIZER_KEYS:
                if f"{name}.{key}" in values:
                    settings[f"optimizer.{key}"] = values[f"{name}.{key}"]
        elif self.optimizer and "optimizer" in values:
            problems.append(f"optimizer {name!r} is not in the space")
        # The units of a stored trial follow its layers, even outside the range.
        expected = {
            d.name
            for d in dimensions.values()
            if d.when is None or (d.when[0] != "layers" and d.drawn_with(values))
        }
        layers = values.get("layers") if "layers" in dimensions else None
        if isinstance(layers, int) and not isinstance(layers, bool) and layers >= 1:
            expected.update(f"units_{k}" for k in range(1, layers + 1))
            settings["architecture.nodes"] = [
                _value(self.units, params.get(f"units_{k}")) for k in range(1, layers + 1)
            ]
        elif "layers" in dimensions and "layers" in values:
            problems.append(f"layers must be an integer >= 1, got {params['layers']!r}")
            layers = None
        activation = values.get("activation", base.architecture.activations[0])
        if layers is not None:
            settings["architecture.activations"] = [activation] * layers
        elif self.activation is not None:
            settings["architecture.activations"] = [activation] * len(base.architecture.nodes)
        settings.update({path: values[path] for path in self.parameters if path in values})
        missing = sorted(expected - set(params))
        unknown = sorted(set(params) - expected)
        if missing:
            problems.append("missing " + ", ".join(missing))
        if unknown:
            problems.append("not in the space: " + ", ".join(unknown))
        if problems:
            raise NotInSpace(
                "the parameters do not match the search space of the runcard: "
                + "; ".join(problems)
            )
        return settings

    def apply(self, base: FitRuncard, params: Mapping[str, Any]) -> FitRuncard:
        """``base`` with the settings that ``params`` fix: the fit runcard of a trial.

        Raises :class:`NotInSpace` when ``params`` are not a point of this space (another
        study's trial), and :class:`RuncardError` when the point makes an invalid fit runcard
        (a combination the load-time checks cannot exclude).
        """
        settings = self._settings(base, params)
        data = with_settings(base.model_dump(mode="json"), settings)
        return runcard_from_dict(data, "<trial parameters>")

    def _probes(self) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
        """Single settings to try on the base runcard, for rules that span fields, with where
        in the space they come from."""
        for name, sub in (self.optimizer or {}).items():
            yield ("optimizer", name), {"optimizer.name": name}
            for key in OPTIMIZER_KEYS:
                dist = getattr(sub, key)
                if dist is not None:
                    for loc, value in _ends(dist):
                        settings = {"optimizer.name": name, f"optimizer.{key}": value}
                        yield ("optimizer", name, key, *loc), settings
        for path, dist in self.parameters.items():
            for loc, value in _ends(dist):
                yield ("parameters", path, *loc), {path: value}

    def problems_on(self, base: FitRuncard) -> list[tuple[tuple[Any, ...], str]]:
        """Where a probe makes ``base`` an invalid fit runcard (at load time)."""
        data = base.model_dump(mode="json")
        problems = []
        for loc, settings in self._probes():
            why = _invalid_because(data, settings)
            if why is not None:
                problems.append((loc, f"with {_shown(settings)} the fit runcard is invalid: {why}"))
        return problems

    def joint_problems(self, base: FitRuncard) -> list[tuple[str, str]]:
        """A problem at ``scan.space.parameters`` when no seeded joint draw of the searched
        parameters makes ``base`` a valid fit runcard; nothing otherwise. For a new study only:
        the schema alone never refuses a stored one."""
        if len(self.parameters) < 2:
            return []  # each value alone was checked at both ends of its range
        data = base.model_dump(mode="json")
        rng = random.Random(0)
        first: tuple[dict[str, Any], str] | None = None
        for _ in range(JOINT_DRAWS):
            settings = {path: _random_value(dist, rng) for path, dist in self.parameters.items()}
            why = _invalid_because(data, settings)
            if why is None:
                return []
            first = first or (settings, why)
        assert first is not None
        settings, why = first
        example = {
            path: float(f"{value:.4g}") if isinstance(value, float) else value
            for path, value in settings.items()
        }
        return [
            (
                "scan.space.parameters",
                f"none of {JOINT_DRAWS} draws from the space makes a valid fit runcard, so "
                f"nearly every trial would be trashed; e.g. with {_shown(example)} (rounded): "
                f"{why}",
            )
        ]
