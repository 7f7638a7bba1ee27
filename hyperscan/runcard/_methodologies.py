# SPDX-License-Identifier: GPL-3.0-or-later
"""``methodologies``: the settings in which each replica of a fit differs from the rest.

An entry is validated as the runcard it makes with the base, so its errors read as a runcard's
and name the entry's key path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, SerializerFunctionWrapHandler, ValidationError, model_serializer
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

from ._architecture import Architecture, Flavour, FlavourPreprocessing
from ._base import (
    MAX_EPOCHS,
    RULE_ERROR,
    UNION_ERROR,
    Int,
    _is_sequence,
    _Section,
    rule_error,
)
from ._replicas import Seeds
from ._training import OptimizerSection, PositivitySection, Stopping

if TYPE_CHECKING:
    from ._fit import FitRuncard

#: The keys in which the members of one fit may differ; every other key is shared by them all
#: (the data, the split of the work, divergence and the folds are one per fit).
MEMBER_KEYS: tuple[str, ...] = (
    "seeds",
    "architecture",
    "optimizer",
    "epochs",
    "stopping",
    "positivity",
    "preprocessing",
)
#: A key that, written alone in a section, lets the section's default rule fill its partner:
#: `nodes` without `activations` gives tanh layers, `multiplier` without `max` clears `max`.
_IMPLIED = {"architecture": ("nodes", "activations"), "positivity": ("multiplier", "max")}


class Methodology(_Section):
    """One replica's methodology in `methodologies`: the per-member sections it sets, each
    complete (the base runcard's values merged with the entry's, key by key), and its trial."""

    trial: Annotated[Int, Field(ge=0)] | None = None
    """The scan trial this methodology comes from (`hyperscan export --sample`); null: none."""
    seeds: Seeds | None = None
    """This replica's `seeds`: any of its keys, the rest as the runcard sets them."""
    architecture: Architecture | None = None
    """This replica's `architecture`: any of its keys, the rest as the runcard sets them."""
    optimizer: OptimizerSection | None = None
    """This replica's `optimizer`: any of its keys, the rest as the runcard sets them."""
    epochs: Annotated[Int, Field(ge=1, le=MAX_EPOCHS)] | None = None
    """This replica's `epochs`."""
    stopping: Stopping | None = None
    """This replica's `stopping`: any of its keys, the rest as the runcard sets them."""
    positivity: PositivitySection | None = None
    """This replica's `positivity`: any of its keys, the rest as the runcard sets them."""
    preprocessing: dict[Flavour, FlavourPreprocessing] | None = None
    """This replica's `preprocessing`: any of its keys, the rest as the runcard sets them."""

    @model_serializer(mode="wrap")
    def _only_what_is_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Written as given: the sections the entry sets (the rest are the base's)."""
        return {key: value for key, value in handler(self).items() if value is not None}

    def settings(self) -> dict[str, Any]:
        """The per-member sections this entry sets, as they replace the base's."""
        return {key: getattr(self, key) for key in MEMBER_KEYS if getattr(self, key) is not None}


def merge_methodology(base: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """``entry``'s keys over ``base`` (runcard data), mapping by mapping, so that a partial
    section keeps the base's other keys; a key a default rule derives from the entry's is
    left to that rule."""
    merged = dict(base)
    for key, value in entry.items():
        below = merged.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            below = dict(below)
            implied = _IMPLIED.get(key)
            if implied and implied[0] in value and implied[1] not in value:
                below.pop(implied[1], None)
            merged[key] = merge_methodology(below, value)
        else:
            merged[key] = value
    return merged


def _relocated(error: ErrorDetails, prefix: tuple[Any, ...]) -> InitErrorDetails:
    """A validation error of a merged runcard, placed under its `methodologies` entry."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    detail: Any
    if kind == RULE_ERROR:
        detail = rule_error(str(ctx["message"]), str(ctx.get("field", "")))
    elif kind == UNION_ERROR:
        detail = PydanticCustomError(UNION_ERROR, error["msg"])
    else:
        detail = kind
    details = InitErrorDetails(type=detail, loc=(*prefix, *error["loc"]), input=error["input"])
    if ctx and not isinstance(detail, PydanticCustomError):
        details["ctx"] = ctx
    return details


def check_methodologies(model: type[FitRuncard], data: Any) -> Any:
    """Validate every `methodologies` entry as the runcard it makes with the base: all its
    errors at once, each under its entry's key path; then store the merged sections."""
    entries = data.get("methodologies") if isinstance(data, dict) else None
    if not _is_sequence(entries) or not entries:
        return data
    try:
        base = model.model_validate({k: v for k, v in data.items() if k != "methodologies"})
    except ValidationError:
        return data  # the base's own errors come first
    replicas = len(base.replica_ids)
    errors: list[InitErrorDetails] = []
    if len(entries) != replicas:
        count = f"{len(entries)} {'entry' if len(entries) == 1 else 'entries'}"
        errors.append(
            InitErrorDetails(
                type=rule_error(
                    f"expected one entry per replica, in the order of `replicas`: the runcard "
                    f"fits {replicas} {'replica' if replicas == 1 else 'replicas'} but "
                    f"`methodologies` has {count}"
                ),
                loc=("methodologies",),
                input=entries,
            )
        )
    base_data = base.model_dump(mode="json", exclude={"methodologies"})
    stored: list[Any] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            stored.append(entry)  # the field's type check says what is wrong
            continue
        shared = [key for key in entry if key in model.model_fields and key not in MEMBER_KEYS]
        for key in shared:
            errors.append(
                InitErrorDetails(
                    type=rule_error(
                        f"'{key}' must be the same for all replicas: set it once, outside "
                        f"`methodologies` (an entry sets only {', '.join(MEMBER_KEYS)}, trial)"
                    ),
                    loc=("methodologies", index, key),
                    input=entry[key],
                )
            )
        partial = {k: v for k, v in entry.items() if k != "trial" and k not in shared}
        try:
            Methodology.model_validate({"trial": entry.get("trial")})
        except ValidationError as error:
            errors += [_relocated(e, ("methodologies", index)) for e in error.errors()]
        try:
            member = model.model_validate(merge_methodology(base_data, partial))
        except ValidationError as error:
            errors += [_relocated(e, ("methodologies", index)) for e in error.errors()]
            continue
        stored.append(
            {
                **({"trial": entry["trial"]} if "trial" in entry else {}),
                **{key: getattr(member, key) for key in MEMBER_KEYS if key in partial},
            }
        )
    if errors:
        raise ValidationError.from_exception_data("runcard", errors)
    return {**data, "methodologies": stored}
