# SPDX-License-Identifier: GPL-3.0-or-later
"""Typed schema of a *fit* runcard: its sections, and the rules that span them.

Defaults follow the NNPDF4.0 fit, so the empty runcard ``{}`` describes an NNPDF4.0-like fit of
the small closure-test data.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from ._architecture import (
    _DEFAULT_PREPROCESSING,
    FLAVOURS,
    Architecture,
    Flavour,
    FlavourPreprocessing,
    default_preprocessing,
)
from ._base import MAX_EPOCHS, Int, _number, _Section, fail_at
from ._data import DataSection
from ._methodologies import Methodology, check_methodologies
from ._replicas import Fold, Replicas, Seeds, check_disjoint_folds, folds_outside
from ._training import (
    _RANGE,
    LAMBDA_UPDATE_INTERVAL,
    DivergenceSection,
    OptimizerSection,
    PositivitySection,
    Stopping,
    TrainingSection,
)


class FitRuncard(_Section):
    """A complete fit runcard.

    A scan runcard holds one as its fit part (:class:`Inlined`: its keys stand beside
    ``scan:``), the base runcard of every trial.
    """

    data: DataSection = Field(default_factory=DataSection)
    """Which data are fitted and how each replica sees them."""
    replicas: Replicas = 1
    """N (replicas 1..N) or a list of replica ids; the replica id seeds its pseudodata and split, so
    replica 7 is the same in either form. In a scan, give `scan.replicas` instead.
    """
    seeds: Seeds = Field(default_factory=Seeds)
    """Base seeds; each is combined with the replica id, so that replicas are reproducible alone."""
    architecture: Architecture = Field(default_factory=Architecture)
    """Hidden layers of the per-replica network (input (x, ln x), output the 8 flavours)."""
    optimizer: OptimizerSection = Field(default_factory=OptimizerSection)
    """Gradient-descent optimiser (NNPDF4.0: Nadam with a tiny, always active clipnorm)."""
    epochs: Annotated[Int, Field(ge=1, le=MAX_EPOCHS)] = 17000
    """Maximum number of training steps (one full-batch gradient step per epoch)."""
    stopping: Stopping = Field(default_factory=Stopping)
    """Per-replica early stopping on the validation χ²."""
    positivity: PositivitySection = Field(default_factory=PositivitySection)
    """Positivity-penalty multiplier λ: starts at `initial` and grows every 100 steps."""
    preprocessing: dict[Flavour, FlavourPreprocessing] = Field(
        default_factory=default_preprocessing
    )
    """Per flavour (Sigma, g, V, V3, V8, T3, T8, T15): `{alpha: [lo, hi], beta: [lo, hi]}`; a
    flavour or exponent left out keeps NNPDF4.0's range.
    """
    divergence: DivergenceSection = Field(default_factory=DivergenceSection)
    """When a replica counts as diverged (and is dropped rather than poisoning the ensemble)."""
    training: TrainingSection = Field(default_factory=TrainingSection)
    """How the training loop runs on the device; none of it changes the fitted result's law."""
    folds: tuple[Fold, ...] = ()
    """k-fold: lists of dataset names; members = folds × replicas, each fold's datasets held out of
    its members' training and scored as their held-out χ² (in `results.json`). An exported k-fold
    trial has them. In a scan, give `scan.folds` instead.
    """
    methodologies: tuple[Methodology, ...] = ()
    """One entry per replica, in the order of `replicas`: the settings in which that replica
    differs from the rest of the runcard (seeds, architecture, optimizer, epochs, stopping,
    positivity, preprocessing; each merged key by key over the runcard's) and, optionally, the
    scan `trial` it comes from. Empty: every replica fits the runcard's methodology.
    """

    @model_validator(mode="before")
    @classmethod
    def _merged_methodologies(cls, data: Any) -> Any:
        return check_methodologies(cls, data)

    @field_validator("folds")
    @classmethod
    def _disjoint(cls, value: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
        check_disjoint_folds(value, "folds")
        return value

    @model_validator(mode="after")
    def _folds_are_fitted(self) -> FitRuncard:
        fail_at(
            [
                (("folds", *loc), message)
                for loc, message in folds_outside(self.folds, self.data.datasets)
            ],
            self,
        )
        return self

    @model_validator(mode="after")
    def _layout_holds_the_trial(self) -> FitRuncard:
        """A batch layout (written by `export`) must be one this trial could have sat in."""
        layout = self.training.batch_layout
        if layout is None:
            return self
        where = ("training", "batch_layout")
        nodes = self.architecture.nodes
        problems = []
        if self.methodologies:
            problems.append(
                (("methodologies",), "a trial's runcard with a training.batch_layout has none")
            )
        if len(layout.widths) < len(nodes) or any(
            width < nodes[min(layer, len(nodes) - 1)] for layer, width in enumerate(layout.widths)
        ):
            problems.append(
                (
                    (*where, "widths"),
                    f"{list(layout.widths)} cannot hold architecture.nodes {list(nodes)}",
                )
            )
        missing = sorted(set(self.architecture.activations) - set(layout.activations))
        if missing:
            problems.append(((*where, "activations"), f"lacks the architecture's {missing}"))
        if self.optimizer.name not in layout.optimizers:
            problems.append(
                ((*where, "optimizers"), f"lacks optimizer.name {self.optimizer.name!r}")
            )
        fail_at(problems, self)
        return self

    @model_validator(mode="after")
    def _representable_in_precision(self) -> FitRuncard:
        """Values the device holds must be numbers of the fit's precision, not inf or 0 there.

        Otherwise the first step sees an infinite learning rate or a zero clipnorm and every
        member diverges or stands still, with a reason far from the key that caused it.
        """
        precision = self.training.precision
        largest, smallest = _RANGE[precision]
        positivity = self.positivity
        values = {
            ("optimizer", "learning_rate"): self.optimizer.learning_rate,
            ("optimizer", "clipnorm"): self.optimizer.clipnorm,
            ("stopping", "threshold_chi2"): self.stopping.threshold_chi2,
            ("stopping", "positivity_threshold"): self.stopping.positivity_threshold,
            ("positivity", "initial"): positivity.initial,
            ("positivity", "max"): positivity.max,
            ("divergence", "max_loss"): self.divergence.max_loss,
        }
        where = f"{precision}'s range (training.precision)"
        problems = []
        for loc, value in values.items():
            if value is not None and value > largest:
                problems.append((loc, f"{_number(value)} is beyond {where}: at most {largest:.3g}"))
            elif value and value < smallest:
                problems.append(
                    (loc, f"{_number(value)} is below {where}: at least {smallest:.3g}")
                )
        if positivity.multiplier is not None:
            updates = self.epochs // LAMBDA_UPDATE_INTERVAL
            growth = math.log10(positivity.initial) + updates * math.log10(positivity.multiplier)
            if growth > math.log10(largest):
                problems.append(
                    (
                        ("positivity", "multiplier"),
                        f"lambda would grow to ~1e{growth:.0f} in {updates} updates, beyond "
                        f"{where}: lower it, or set positivity.max instead",
                    )
                )
        fail_at(problems, self)
        return self

    @field_validator("preprocessing", mode="before")
    @classmethod
    def _merge_partial_flavours(cls, value: Any) -> Any:
        """Fill a flavour's missing ``alpha`` or ``beta`` from its default, so one can be set."""
        if not isinstance(value, dict):
            return value
        merged = {}
        for flavour, entry in value.items():
            default = _DEFAULT_PREPROCESSING.get(flavour) if isinstance(flavour, str) else None
            if default is not None and isinstance(entry, dict):
                entry = {**default, **entry}
            merged[flavour] = entry
        return merged

    @field_validator("preprocessing", mode="after")
    @classmethod
    def _complete_flavours(
        cls, value: dict[str, FlavourPreprocessing]
    ) -> dict[str, FlavourPreprocessing]:
        """Add the flavours left out, with their defaults, in the canonical order."""
        defaults = default_preprocessing()
        return {f: value.get(f, defaults[f]) for f in FLAVOURS}

    @property
    def replica_ids(self) -> tuple[int, ...]:
        """The ids of the fitted replicas, 1-based, in runcard order."""
        if isinstance(self.replicas, int):
            return tuple(range(1, self.replicas + 1))
        return tuple(self.replicas)

    def _methodology(self, replica: int) -> Methodology | None:
        ids = self.replica_ids
        if replica not in ids:
            raise ValueError(f"replica {replica} is not fitted by this runcard ({list(ids)})")
        return self.methodologies[ids.index(replica)] if self.methodologies else None

    def member_runcard(self, replica: int) -> FitRuncard:
        """The runcard of one replica alone: the base with its methodology merged in."""
        entry = self._methodology(replica)
        settings = entry.settings() if entry is not None else {}
        return self.model_copy(update={**settings, "methodologies": (), "replicas": (replica,)})

    def member_trial(self, replica: int) -> int | None:
        """The scan trial ``replica``'s methodology comes from, if any."""
        entry = self._methodology(replica)
        return entry.trial if entry is not None else None

    def __hash__(self) -> int:
        # The preprocessing dict makes pydantic's field-tuple hash fail; the canonical JSON
        # form is equal exactly when the runcards are.
        return hash((type(self), self.model_dump_json()))
