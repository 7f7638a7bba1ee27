# SPDX-License-Identifier: GPL-3.0-or-later
"""Which fit settings a scan may search, and whether a distribution suits its setting.

The space is checked against the fit schema when the runcard is loaded (the setting exists, is a
single value, the range has its type and lies inside its allowed values, every choice is valid),
so that a mistake costs seconds instead of a study whose trials all fail. Errors use the fit
runcard's machinery: key paths and plain sentences.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import Field, TypeAdapter, ValidationError

from ._architecture import Architecture
from ._base import MAX_UNITS, Int
from ._distributions import Choices, Range
from ._fit import FitRuncard
from ._load import _describe, _is_model, _join_key, _message, _unwrap


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
    if path == "training.batch_layout" or path.startswith("training.batch_layout."):
        return "`export` writes the batch a worker fitted a trial in; a scan does not set it"
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
