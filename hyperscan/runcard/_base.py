# SPDX-License-Identifier: GPL-3.0-or-later
"""What every runcard section is built from: strict scalar types, the section base, and the
errors of rules pydantic cannot express.

Every section is a frozen pydantic model that forbids unknown keys, so a typo in a runcard is an
error instead of a silently ignored setting. Types are strict (no ``"100"`` -> 100, no
``1.5`` -> 1, no ``true`` -> 1) because a runcard that only works by coercion is a runcard whose
author meant something else. Integers are accepted where a float is expected.

Cross-field rules raise :func:`rule_error`, whose context names the offending field, so that the
loader can report the exact key path rather than the enclosing section.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import AllowInfNan, BaseModel, ConfigDict, Field, Strict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

# --------------------------------------------------------------------------------------------
# Error helpers shared with the loader

#: Error type of a cross-field rule; its context holds ``message`` and the dotted ``field``
#: (relative to the model that raised it) that the loader appends to the key path.
RULE_ERROR = "runcard_rule"
#: Error type of a union field whose input matched none of its forms.
UNION_ERROR = "runcard_union"


def rule_error(message: str, field: str = "") -> PydanticCustomError:
    """An error for a rule that pydantic cannot express, pointing at ``field`` when given."""
    return PydanticCustomError(RULE_ERROR, "{message}", {"message": message, "field": field})


def fail_at(problems: Iterable[tuple[tuple[Any, ...], str]], value: Any) -> None:
    """Raise every problem at once, each at its location relative to the validated object.

    pydantic merges a ``ValidationError`` raised inside a validator into the enclosing one, so a
    user sees all mistakes of a section rather than the first.
    """
    details = [
        InitErrorDetails(type=rule_error(message), loc=loc, input=value)
        for loc, message in problems
    ]
    if details:
        raise ValidationError.from_exception_data("runcard", details)


class Inlined:
    """Marks a model field whose keys a runcard writes beside the model's other keys (a scan
    runcard's fit part): errors name them without the field's own name. Keys in ``without``
    are not written there (a scan runcard has no ``methodologies``)."""

    def __init__(self, without: tuple[str, ...] = ()) -> None:
        self.without = without


def _number(value: Any) -> str:
    """A number as a user would write it: 0 rather than 0.0, 1e-06 as repr gives it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


# --------------------------------------------------------------------------------------------
# Scalar types: strict, finite

Int = Annotated[int, Strict()]
Float = Annotated[float, Strict(), AllowInfNan(False)]
Bool = Annotated[bool, Strict()]
Str = Annotated[str, Strict()]

PositiveInt = Annotated[Int, Field(ge=1)]
PositiveFloat = Annotated[Float, Field(gt=0)]
#: Upper bounds that turn a slip of the keyboard (a missing decimal point, extra zeros) into
#: a message instead of an allocation that never ends or an overflow deep in TensorFlow.
MAX_REPLICAS = 10_000
MAX_UNITS = 10_000
MAX_THREADS = 1024
MAX_EPOCHS = 10**9
MAX_LEVEL1_FITS = 1000
#: Seeds stay below 2**32 so that every random generator downstream (numpy, TensorFlow) accepts
#: them unchanged; replica ids too, which also fill the integer arrays of a fit's output.
Seed = Annotated[Int, Field(ge=0, le=2**32 - 1)]
ReplicaId = Annotated[Int, Field(ge=1, le=2**32 - 1)]


def _unique(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """Reject repeated entries: a repeated replica or dataset is always a mistake."""
    seen: set[Any] = set()
    repeated = [v for v in values if v in seen or seen.add(v)]
    if repeated:
        distinct = list(dict.fromkeys(repeated))
        shown = ", ".join(repr(v) for v in distinct)
        verb = "appears" if len(distinct) == 1 else "appear"
        raise rule_error(f"entries must be distinct, but {shown} {verb} more than once")
    return values


def _is_sequence(value: Any) -> bool:
    return isinstance(value, list | tuple)


class _Section(BaseModel):
    """Base of every runcard model: immutable, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
