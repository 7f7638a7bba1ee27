# SPDX-License-Identifier: GPL-3.0-or-later
"""How each member trains: the optimiser, early stopping, the positivity multiplier, when a
member counts as diverged, and how the training loop runs on the device."""

from __future__ import annotations

import sys
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ._architecture import Activation
from ._base import (
    MAX_EPOCHS,
    MAX_THREADS,
    Bool,
    Float,
    Int,
    PositiveFloat,
    _number,
    _Section,
    rule_error,
)

#: Steps between growths of the positivity multiplier lambda (n3fit's 100).
LAMBDA_UPDATE_INTERVAL = 100

OptimizerName = Literal["adam", "nadam", "amsgrad", "rmsprop", "adadelta", "sgd"]
Precision = Literal["float32", "float64"]
#: The largest finite and the smallest normal number of each precision.
_RANGE = {
    "float32": ((2 - 2.0**-23) * 2.0**127, 2.0**-126),
    "float64": (sys.float_info.max, sys.float_info.min),
}


class OptimizerSection(_Section):
    """Gradient-descent optimiser (NNPDF4.0: Nadam with a tiny, always active clipnorm)."""

    name: OptimizerName = "nadam"
    """Gradient-descent optimiser: adam, nadam, amsgrad, rmsprop, adadelta, sgd."""
    learning_rate: PositiveFloat = 2.621e-3
    """Learning rate of the optimiser."""
    clipnorm: PositiveFloat | None = 6.073e-6
    """Each variable's gradient clipped to this norm, member by member (Keras' `clipnorm`, as in
    n3fit); null: none.
    """


class Stopping(_Section):
    """Per-replica early stopping on the validation chi2."""

    patience: Annotated[Float, Field(gt=0, le=1)] = 0.1
    """Steps without improvement before a replica stops, as a fraction of `epochs`."""
    threshold_chi2: PositiveFloat = 3.5
    """A replica has no best step (nor patience count) until its validation χ² per point is below
    this; one that never gets there is `pos-veto`, as in n3fit.
    """
    positivity_threshold: Annotated[Float, Field(ge=0)] = 1.0e-6
    """A best step needs every positivity set's penalty Σ elu(−λ·y), with the current multiplier λ,
    below this (n3fit's test).
    """


class PositivitySection(_Section):
    """Positivity-penalty multiplier lambda: starts at ``initial`` and grows every 100 steps.

    Either ``max`` (the value reached at the last epoch) or ``multiplier`` (the factor applied
    every 100 steps) fixes the growth; exactly one of them is set. Writing only ``multiplier``
    clears the default ``max``.
    """

    initial: PositiveFloat = 184.8
    """Initial positivity multiplier λ."""
    max: PositiveFloat | None = 1.0e6
    """λ reached at the last epoch (it grows every 100 steps). Exactly one of `max` and `multiplier`
    is set; writing only `multiplier` clears this default.
    """
    multiplier: Annotated[Float, Field(gt=1)] | None = None
    """Instead of `max`: the factor λ is multiplied by every 100 steps."""

    @model_validator(mode="before")
    @classmethod
    def _multiplier_replaces_default_max(cls, data: Any) -> Any:
        """Let ``multiplier: 1.1`` alone mean "no max" without the user writing ``max: null``."""
        if isinstance(data, dict) and data.get("multiplier") is not None and "max" not in data:
            return {**data, "max": None}
        return data

    @model_validator(mode="after")
    def _exactly_one_growth(self) -> PositivitySection:
        if self.max is not None and self.multiplier is not None:
            raise rule_error(
                "set either 'max' (lambda reached at the last epoch) or 'multiplier' "
                "(growth every 100 steps), not both"
            )
        if self.max is None and self.multiplier is None:
            raise rule_error("set one of 'max' or 'multiplier'; both are null")
        if self.max is not None and self.max < self.initial:
            raise rule_error(
                f"must be >= initial ({_number(self.initial)}), got {_number(self.max)}: "
                "lambda only grows",
                "max",
            )
        return self


class DivergenceSection(_Section):
    """When a replica counts as diverged (and is dropped rather than poisoning the ensemble)."""

    max_loss: PositiveFloat = 1.0e10
    """A member whose loss exceeds this, or is not finite, is diverged and frozen; a start already
    past it (about 1 random draw in 100) is redrawn from the member's own seed, up to 10 times,
    and `results.json` says `redrawn_starts`.
    """


class BatchLayout(_Section):
    """Where a scan's worker fitted a trial among others (fit/_slots.py): the batch's slots, the
    trial's slot, and the model's padded widths, activations and optimisers. A member's rounding
    depends on these, and training amplifies it, so `fit` rebuilds this batch, the other slots
    left empty, and repeats the trial bit for bit. `export` writes it; do not edit it."""

    slots: Annotated[Int, Field(ge=1)]
    """Slots of the batch (trials fitted at once)."""
    slot: Annotated[Int, Field(ge=0)]
    """The trial's slot, from 0."""
    widths: Annotated[tuple[Annotated[Int, Field(ge=1)], ...], Field(min_length=1)]
    """The model's padded hidden widths."""
    activations: Annotated[tuple[Activation, ...], Field(min_length=1)]
    """The activations the model's rows could choose from."""
    optimizers: Annotated[tuple[OptimizerName, ...], Field(min_length=1)]
    """The optimisers the model's rows could choose from."""

    @model_validator(mode="after")
    def _slot_in_batch(self) -> BatchLayout:
        if self.slot >= self.slots:
            raise rule_error(
                f"slot {self.slot} is not one of the batch's {self.slots} (0 to {self.slots - 1})",
                "slot",
            )
        return self


class TrainingSection(_Section):
    """How the training loop runs on the device; none of it changes the fitted result's law."""

    steps_per_call: Annotated[Int, Field(ge=1, le=MAX_EPOCHS)] = 100
    """Steps per compiled device call between host syncs."""
    precision: Precision = "float32"
    """float32 or float64."""
    jit: Bool = True
    """XLA-compile the training loop."""
    compact: Bool = True
    """Drop stopped members from the batch at a sync, once the steps it saves pay for tracing the
    smaller loop (docs/architecture.md); the fit's results are unchanged.
    """
    max_padding_waste: Annotated[Float, Field(ge=0.0, le=1.0)] = 0.85
    """Members of different architectures share one model padded to their widest layers
    (docs/architecture.md); padding waste is the fraction of that model's multiply-adds,
    1 − Σ member cost / (members × padded cost) with cost Σ fan_in·fan_out, that compute nothing
    a member uses. Past this fraction the fit splits the members into shape classes, each its
    own batched model, fitted one after the other; the results are the same either way. The
    default keeps dis-nlo-scan.yml's space (80% waste) in one model: its step is no slower
    than that of the shape classes at 0.5 (docs/performance.md), which compile a loop each.
    """
    threads: Annotated[Int, Field(ge=1, le=MAX_THREADS)] | None = None
    """CPU threads for TensorFlow (null: all cores); scan workers use it unless started with
    `--threads`. Training is chaotic enough that the summation order a thread count implies shows
    in the result, so an exported trial keeps the thread count its worker used.
    """
    batch_layout: BatchLayout | None = None
    """The batch a scan's worker fitted this trial in, written by `export` so that `fit` repeats
    the trial bit for bit (with the same versions and `threads`, on the same machine); null: the
    members are fitted alone.
    """
