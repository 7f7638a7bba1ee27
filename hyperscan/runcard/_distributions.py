# SPDX-License-Identifier: GPL-3.0-or-later
"""What a searched setting is drawn from: a numeric range or a list of choices.

A range keeps integer bounds as integers, because Optuna draws an integer setting with
``suggest_int`` and stores it as an integer.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, Discriminator, Field, Tag, model_validator

from ._base import (
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

__all__ = ["Choices", "Distribution", "Range"]


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
