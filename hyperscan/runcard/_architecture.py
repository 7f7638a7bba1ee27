# SPDX-License-Identifier: GPL-3.0-or-later
"""The network of each member: its hidden layers (``architecture``) and the ranges of its
preprocessing exponents (``preprocessing``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from ._base import MAX_UNITS, Float, Int, _is_sequence, _number, _Section, rule_error

Activation = Literal["tanh", "sigmoid", "relu", "elu", "softplus", "linear"]
Initializer = Literal["glorot_normal", "glorot_uniform", "he_normal", "he_uniform", "lecun_normal"]


class Architecture(_Section):
    """Hidden layers of the per-replica network (input (x, ln x), output the 8 flavours)."""

    nodes: Annotated[
        tuple[Annotated[Int, Field(ge=1, le=MAX_UNITS)], ...], Field(min_length=1, max_length=10)
    ] = (25, 20)
    """Units of each hidden layer (the output layer is 8 linear units, one per fitted flavour)."""
    activations: tuple[Activation, ...] = ("tanh", "tanh")
    """One per hidden layer: tanh, sigmoid, relu, elu, softplus or linear. Defaults to tanh for
    every layer when only `nodes` is given.
    """
    initializer: Initializer = "glorot_normal"
    """Weight initialiser: glorot_normal/uniform, he_normal/uniform, lecun_normal."""

    @model_validator(mode="before")
    @classmethod
    def _default_activations(cls, data: Any) -> Any:
        """Give every layer tanh when only ``nodes`` is written, so changing depth is one edit."""
        if isinstance(data, dict) and "activations" not in data:
            nodes = data.get("nodes")
            if _is_sequence(nodes):
                return {**data, "activations": ["tanh"] * len(nodes)}
        return data

    @model_validator(mode="after")
    def _one_activation_per_layer(self) -> Architecture:
        if len(self.activations) != len(self.nodes):
            raise rule_error(
                f"expected one activation per hidden layer: 'nodes' has {len(self.nodes)} "
                f"layer(s) but 'activations' has {len(self.activations)} entries",
                "activations",
            )
        return self


Flavour = Literal["Sigma", "g", "V", "V3", "V8", "T3", "T8", "T15"]

#: The fitted evolution-basis flavours, in canonical order (that of ``preprocessing``).
FLAVOURS: tuple[str, ...] = ("Sigma", "g", "V", "V3", "V8", "T3", "T8", "T15")

#: Bounds of a preprocessing exponent range, ``[lo, hi]``.
#: alpha < 2 keeps the momentum integral of x^(1-alpha) finite at small x; alpha >= -2 and
#: beta <= 20 are sanity bounds far outside any NNPDF range (they catch sign and scale slips);
#: beta > 0 makes the PDF vanish at x = 1.
AlphaBound = Annotated[Float, Field(ge=-2, lt=2)]
BetaBound = Annotated[Float, Field(gt=0, le=20)]


def _two_bounds(value: Any) -> Any:
    """Check the length first, so a wrong-length range gets one clear message."""
    if _is_sequence(value) and len(value) != 2:
        count = f"{len(value)} entry" if len(value) == 1 else f"{len(value)} entries"
        raise rule_error(f"expected a list of two bounds [lo, hi], got {count}")
    return value


AlphaRange = Annotated[tuple[AlphaBound, AlphaBound], BeforeValidator(_two_bounds)]
BetaRange = Annotated[tuple[BetaBound, BetaBound], BeforeValidator(_two_bounds)]


class FlavourPreprocessing(_Section):
    """Ranges of the exponents of x^(1-alpha) (1-x)^beta, drawn once per replica."""

    alpha: AlphaRange
    """[lo, hi]: range of the small-x exponent α of x^(1−α), drawn once per replica."""
    beta: BetaRange
    """[lo, hi]: range of the large-x exponent β of (1−x)^β, drawn once per replica."""

    @field_validator("alpha", "beta")
    @classmethod
    def _ordered(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        lo, hi = value
        if lo > hi:
            raise rule_error(
                f"expected [lo, hi] with lo <= hi, got lo {_number(lo)} > hi {_number(hi)}"
            )
        return value


#: NNPDF4.0 preprocessing ranges.
_DEFAULT_PREPROCESSING: dict[str, dict[str, tuple[float, float]]] = {
    "Sigma": {"alpha": (1.089, 1.119), "beta": (1.475, 3.119)},
    "g": {"alpha": (0.7504, 1.098), "beta": (2.814, 5.669)},
    "V": {"alpha": (0.479, 0.7384), "beta": (1.549, 3.532)},
    "V3": {"alpha": (0.1073, 0.4397), "beta": (1.733, 3.458)},
    "V8": {"alpha": (0.5507, 0.7837), "beta": (1.516, 3.356)},
    "T3": {"alpha": (-0.4506, 0.9305), "beta": (1.745, 3.424)},
    "T8": {"alpha": (0.5877, 0.8687), "beta": (1.522, 3.515)},
    "T15": {"alpha": (1.089, 1.141), "beta": (1.492, 3.222)},
}


def default_preprocessing() -> dict[str, FlavourPreprocessing]:
    """The NNPDF4.0 ranges for every flavour, in :data:`FLAVOURS` order."""
    return {f: FlavourPreprocessing(**_DEFAULT_PREPROCESSING[f]) for f in FLAVOURS}
