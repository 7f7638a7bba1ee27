"""The ensemble model: a PDF per member, its observables and χ², all with a member axis."""

from hyperscan.model._chi2_plan import HELD_OUT, TRAINING, VALIDATION
from hyperscan.model._ensemble import (
    VALENCE_SUM_RULES,
    EnsembleModel,
    MemberInputs,
    Observables,
    preprocessing,
)
from hyperscan.model._member_axis import MemberAxis, take_members
from hyperscan.model._network import ACTIVATIONS, initial_weights
from hyperscan.model._quadrature import sum_rule_quadrature
from hyperscan.model._shapes import (
    MemberShapes,
    Shape,
    embed,
    layer_cost,
    padded_widths,
    padding_waste,
    shape_classes,
    unembed,
    zero_weights,
)

__all__ = [
    "ACTIVATIONS",
    "HELD_OUT",
    "TRAINING",
    "VALENCE_SUM_RULES",
    "VALIDATION",
    "EnsembleModel",
    "MemberAxis",
    "MemberInputs",
    "MemberShapes",
    "Observables",
    "Shape",
    "embed",
    "initial_weights",
    "layer_cost",
    "padded_widths",
    "padding_waste",
    "preprocessing",
    "shape_classes",
    "sum_rule_quadrature",
    "take_members",
    "unembed",
    "zero_weights",
]
