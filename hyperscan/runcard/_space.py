# SPDX-License-Identifier: GPL-3.0-or-later
"""The search space of a scan (``scan.space``): one object that validates it, draws its points
and turns a point into the fit runcard of a trial.

The space is checked against the fit schema when the runcard is loaded (the setting exists, is a
single value, the range has its type and lies inside its allowed values, every choice is valid),
so that a mistake costs seconds instead of a study whose trials all fail. Errors use the fit
runcard's machinery: key paths and plain sentences.

Parameter names are flat and stable, because they are what Optuna stores and what the sampler
learns from: ``optimizer``; ``<optimizer>.learning_rate`` and ``<optimizer>.clipnorm`` (the
optimiser in the name keeps one distribution per optimiser, so TPE does not mix Adam's learning
rates with SGD's); ``layers`` and ``units_1`` .. ``units_<layers>``; ``activation``; and each
dotted path of ``scan.space.parameters`` as itself. :meth:`Space.apply` needs only the
parameters a trial stored, so a finished trial is exported without drawing anything again.

Drawing takes any object with Optuna's ``suggest_*`` methods, so this package needs no Optuna.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import functools
import itertools
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol, get_args, get_origin

from pydantic import (
    AfterValidator,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ._architecture import Activation, Architecture
from ._base import (
    MAX_UNITS,
    UNION_ERROR,
    Bool,
    Float,
    Int,
    PositiveFloat,
    PositiveInt,
    Str,
    _number,
    _Section,
    _unique,
    fail_at,
)
from ._fit import FitRuncard
from ._load import (
    RuncardError,
    _describe,
    _is_model,
    _join_key,
    _message,
    _problems,
    _unwrap,
    runcard_from_dict,
)
from ._training import OptimizerName

__all__ = [
    "Choices",
    "Dimension",
    "Distribution",
    "NotInSpace",
    "OptimizerSpace",
    "Range",
    "Space",
    "with_settings",
]


def _show(value: Any) -> str:
    """A value as written in YAML: 1e-05, 'tanh', null, true."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    return _number(value)


# --------------------------------------------------------------------------------------------
# Distributions


def _number_form(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return None


def _choice_form(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    return _number_form(value) or ("str" if isinstance(value, str) else None)


#: A range bound: an integer bound stays an integer (an integer setting is drawn as one).
Number = Annotated[
    Annotated[Int, Tag("int")] | Annotated[Float, Tag("float")],
    Discriminator(
        _number_form,
        custom_error_type=UNION_ERROR,
        custom_error_message="expected a number",
    ),
]
Step = Annotated[
    Annotated[PositiveInt, Tag("int")] | Annotated[PositiveFloat, Tag("float")],
    Discriminator(
        _number_form,
        custom_error_type=UNION_ERROR,
        custom_error_message="expected a positive number",
    ),
]
#: One value of a categorical distribution (the types Optuna stores).
Choice = (
    Annotated[
        Annotated[Bool, Tag("bool")]
        | Annotated[Int, Tag("int")]
        | Annotated[Float, Tag("float")]
        | Annotated[Str, Tag("str")],
        Discriminator(
            _choice_form,
            custom_error_type=UNION_ERROR,
            custom_error_message="expected a number, a string, a boolean or null",
        ),
    ]
    | None
)


class Range(_Section):
    """A numeric range. Integer bounds are drawn as integers (``suggest_int``), others as floats.

    After validation a range for a float setting has float bounds, so the bound type alone tells
    how it is drawn.
    """

    low: Number
    """Lowest value drawn. Integer bounds are drawn as integers, others as floats."""
    high: Number
    """Highest value drawn (> low)."""
    log: Bool = False
    """Draw uniformly in log(value) (learning rates, penalties spanning decades); needs low > 0."""
    step: Step | None = None
    """Draw only low, low + step, ...; high − low must be a multiple of it; not with `log`."""

    @model_validator(mode="after")
    def _consistent(self) -> Range:
        problems: list[tuple[tuple[Any, ...], str]] = []
        if not self.low < self.high:
            hint = (
                " (to fix the value, set it in the base runcard)" if self.low == self.high else ""
            )
            problems.append(
                (
                    ("high",),
                    f"expected low < high, got low {_number(self.low)} >= "
                    f"high {_number(self.high)}{hint}",
                )
            )
        if self.log and self.low <= 0:
            problems.append((("low",), f"a log range needs low > 0, got low {_number(self.low)}"))
        if self.log and self.step is not None:
            problems.append((("step",), "'step' cannot be combined with 'log: true'"))
        elif self.step is not None and self.low < self.high:
            count = (self.high - self.low) / self.step
            if not math.isclose(count, round(count), rel_tol=1e-9, abs_tol=1e-9):
                problems.append(
                    (
                        ("step",),
                        f"high - low ({_number(self.high - self.low)}) must be a multiple "
                        f"of step ({_number(self.step)})",
                    )
                )
        fail_at(problems, self)
        return self

    @property
    def is_int(self) -> bool:
        """Drawn as an integer (only ranges of integer settings keep integer bounds)."""
        return isinstance(self.low, int) and isinstance(self.high, int)


class Choices(_Section):
    """A categorical distribution: one of the listed values."""

    choices: Annotated[tuple[Choice, ...], Field(min_length=1), AfterValidator(_unique)]
    """The values to choose from: numbers, strings, booleans or null."""


def _distribution_form(value: Any) -> str | None:
    if isinstance(value, Choices) or (isinstance(value, dict) and "choices" in value):
        return "categorical"
    if isinstance(value, Range | dict):
        return "range"
    return None


Distribution = Annotated[
    Annotated[Range, Tag("range")] | Annotated[Choices, Tag("categorical")],
    Discriminator(
        _distribution_form,
        custom_error_type=UNION_ERROR,
        custom_error_message="expected a range {low, high} (with optional log, step) "
        "or {choices: [...]}",
    ),
]


# --------------------------------------------------------------------------------------------
# What a distribution may target


@dataclass(frozen=True)
class _Target:
    """A searchable setting as far as a distribution is concerned."""

    name: str  # how messages name it
    kind: str  # int | float | bool | str | choice
    adapter: TypeAdapter[Any]
    leaf: Any  # the unwrapped type, for listing a Literal's values


def _target_from(name: str, annotation: Any) -> _Target:
    leaf, _ = _unwrap(annotation)
    if get_origin(leaf) is Literal:
        kind = "choice"
    else:
        kind = {bool: "bool", int: "int", float: "float", str: "str"}.get(leaf, "")
    return _Target(name, kind, TypeAdapter(annotation), leaf)


@functools.cache
def _fit_settings() -> dict[str, Any]:
    """Every field of the fit runcard reachable through sections, by dotted path: annotation."""
    found: dict[str, Any] = {}

    def walk(model: Any, prefix: str) -> None:
        for name, field in model.model_fields.items():
            path = _join_key(prefix, name)
            annotation = (
                Annotated[(field.annotation, *field.metadata)]
                if field.metadata
                else field.annotation
            )
            leaf, _ = _unwrap(annotation)
            found[path] = annotation
            if _is_model(leaf):
                walk(leaf, path)

    walk(FitRuncard, "")
    return found


@functools.cache
def _target(path: str) -> _Target:
    return _target_from(path, _fit_settings()[path])


@functools.cache
def _scalar_settings() -> tuple[str, ...]:
    """Dotted paths of the fit settings that hold a single value."""
    return tuple(p for p in _fit_settings() if _target(p).kind and _fixed_reason(p) is None)


def _max_layers() -> int:
    metadata = Architecture.model_fields["nodes"].metadata
    return next(m.max_length for m in metadata if getattr(m, "max_length", None) is not None)


_LAYERS = _target_from("the number of hidden layers", Annotated[Int, Field(ge=1, le=_max_layers())])
_UNITS = _target_from("the number of units", Annotated[Int, Field(ge=1, le=MAX_UNITS)])


def _fixed_reason(path: str) -> str | None:
    """Why a setting cannot be searched through ``parameters`` whatever the space, or None."""
    if path == "replicas":
        return "the replicas of a trial are set by 'scan.replicas'"
    if path == "data.datasets":
        return "the fitted datasets are fixed for a study; use 'scan.folds' to hold some out"
    if path == "folds":
        return "a study's folds are set by 'scan.folds'"
    if path in ("data.closure", "data.real") or path.startswith(("data.closure.", "data.real.")):
        return "the data are fixed for a study (workers check them against its fingerprint)"
    if path == "architecture.nodes":
        return "search the hidden layers with 'scan.space.layers' and 'scan.space.units'"
    if path == "architecture.activations":
        return "search the activation with 'scan.space.activation'"
    if path == "training.threads":
        return "a worker runs every trial with its own threads (--threads, else this setting)"
    if path == "training.steps_per_call":
        return "it spaces the pruner's reports, which must mean the same for every trial"
    if path == "preprocessing" or path.startswith("preprocessing."):
        return "preprocessing ranges are [lo, hi] pairs, not single values: they cannot be searched"
    return None


def _not_searchable(path: str) -> str | None:
    """Why ``path`` cannot be a key of ``scan.space.parameters``, or None when it can."""
    fixed = _fixed_reason(path)
    if fixed is not None:
        return f"'{path}' cannot be searched: {fixed}"
    settings = _fit_settings()
    if path in settings:
        if _target(path).kind:
            return None
        inside = [p for p in _scalar_settings() if p.startswith(f"{path}.")]
        if inside:
            return f"'{path}' is a section; name one of its settings: " + ", ".join(inside)
        return f"'{path}' is not a single value, so it cannot be searched"
    close = difflib.get_close_matches(path, _scalar_settings(), n=3, cutoff=0.6)
    if close:
        return (
            f"unknown setting '{path}' (did you mean " + " or ".join(repr(c) for c in close) + "?)"
        )
    return f"unknown setting '{path}'; searchable settings: " + ", ".join(_scalar_settings())


def _expected(target: _Target) -> str:
    if target.kind == "choice":
        return "one of " + ", ".join(repr(str(a)) for a in get_args(target.leaf))
    return {"bool": "true or false", "str": "a string"}[target.kind]


def _value_problem(target: _Target, value: Any) -> str | None:
    """What the fit schema says about ``value`` for this setting, or None if it accepts it."""
    try:
        target.adapter.validate_python(value)
    except ValidationError as err:
        return _message(err.errors(include_url=False)[0], target.leaf, None)
    return None


def _checked(
    dist: Range | Choices, target: _Target
) -> tuple[Range | Choices, list[tuple[tuple[Any, ...], str]]]:
    """Check a distribution against its setting; float settings get float bounds."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    if isinstance(dist, Choices):
        for index, choice in enumerate(dist.choices):
            problem = _value_problem(target, choice)
            if problem is not None:
                problems.append(
                    (("choices", index), f"{problem} (not a valid value of {target.name})")
                )
        return dist, problems
    if target.kind not in ("int", "float"):
        return dist, [
            (
                (),
                f"{target.name} takes {_expected(target)}: "
                "give {choices: [...]} instead of a range",
            )
        ]
    bounds = {"low": dist.low, "high": dist.high, "step": dist.step}
    if target.kind == "int":
        for key, value in bounds.items():
            if value is not None and not isinstance(value, int):
                hint = f" (write {int(value)})" if value.is_integer() else ""
                problems.append(
                    (
                        (key,),
                        f"{target.name} is an integer setting: expected an integer, "
                        f"got {_describe(value)}{hint}",
                    )
                )
        if problems:
            return dist, problems
    for key in ("low", "high"):
        problem = _value_problem(target, bounds[key])
        if problem is not None:
            problems.append(
                ((key,), f"{problem} (the range must lie inside the values {target.name} allows)")
            )
    if target.kind == "float":
        step = None if dist.step is None else float(dist.step)
        dist = dist.model_copy(
            update={"low": float(dist.low), "high": float(dist.high), "step": step}
        )
    return dist, problems


# --------------------------------------------------------------------------------------------
# Drawing a point of the space, and applying it to a base runcard


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


#: Settings of an optimiser sub-space, each an Optuna parameter ``<optimizer>.<key>``.
OPTIMIZER_KEYS: tuple[str, ...] = ("learning_rate", "clipnorm")


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


# --------------------------------------------------------------------------------------------
# The space


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
