# SPDX-License-Identifier: GPL-3.0-or-later
"""Typed schema of a *fit* runcard.

Every section is a frozen pydantic model that forbids unknown keys, so a typo in a runcard is an
error instead of a silently ignored setting. Types are strict (no ``"100"`` -> 100, no
``1.5`` -> 1, no ``true`` -> 1) because a runcard that only works by coercion is a runcard whose
author meant something else. Integers are accepted where a float is expected.

Defaults follow the NNPDF4.0 fit, so the empty runcard ``{}`` describes an NNPDF4.0-like fit of
the small closure-test data.

Cross-field rules raise :func:`rule_error`, whose context names the offending field, so that the
loader can report the exact key path rather than the enclosing section.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    Tag,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

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
#: Upper bounds that turn a slip of the keyboard (a missing decimal point, extra zeros) into
#: a message instead of an allocation that never ends or an overflow deep in TensorFlow.
MAX_REPLICAS = 10_000
MAX_UNITS = 10_000
MAX_THREADS = 1024
MAX_EPOCHS = 10**9
MAX_LEVEL1_FITS = 1000
#: Steps between growths of the positivity multiplier lambda (n3fit's 100).
LAMBDA_UPDATE_INTERVAL = 100
#: Standard DIS cuts of NNPDF (validphys ``q2min``, ``w2min``; W2 = Q2 (1 - x) / x), GeV^2:
#: the defaults of ``data.real`` and of the data layer's real-data loaders.
DEFAULT_Q2MIN = 3.49
DEFAULT_W2MIN = 12.5
PositiveFloat = Annotated[Float, Field(gt=0)]
#: Seeds stay below 2**32 so that every random generator downstream (numpy, TensorFlow) accepts
#: them unchanged; replica ids too, which also fill the integer arrays of a fit's output.
Seed = Annotated[Int, Field(ge=0, le=2**32 - 1)]
ReplicaId = Annotated[Int, Field(ge=1, le=2**32 - 1)]

ClosureSize = Literal["tiny", "small", "medium", "nnpdf40"]
Activation = Literal["tanh", "sigmoid", "relu", "elu", "softplus", "linear"]
Initializer = Literal["glorot_normal", "glorot_uniform", "he_normal", "he_uniform", "lecun_normal"]
OptimizerName = Literal["adam", "nadam", "amsgrad", "rmsprop", "adadelta", "sgd"]
Precision = Literal["float32", "float64"]
#: The largest finite and the smallest normal number of each precision.
_RANGE = {
    "float32": ((2 - 2.0**-23) * 2.0**127, 2.0**-126),
    "float64": (sys.float_info.max, sys.float_info.min),
}
Flavour = Literal["Sigma", "g", "V", "V3", "V8", "T3", "T8", "T15"]

#: The fitted evolution-basis flavours, in canonical order (that of ``preprocessing``).
FLAVOURS: tuple[str, ...] = ("Sigma", "g", "V", "V3", "V8", "T3", "T8", "T15")


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


#: One fold of a k-fold partition: the names of the datasets its members do not train on.
Fold = Annotated[tuple[Str, ...], Field(min_length=1), AfterValidator(_unique)]


def check_disjoint_folds(folds: tuple[tuple[str, ...], ...], key: str) -> None:
    """A dataset belongs to one fold only; ``key`` is where the folds are (in messages)."""
    first: dict[str, int] = {}
    problems: list[tuple[tuple[Any, ...], str]] = []
    for fold, names in enumerate(folds):
        for index, name in enumerate(names):
            if name in first:
                problems.append(
                    (
                        (fold, index),
                        f"{name!r} is already in fold {first[name]} "
                        f"({key}[{first[name]}]); a dataset belongs to one fold only",
                    )
                )
            else:
                first[name] = fold
    fail_at(problems, folds)


def folds_outside(folds: tuple[tuple[str, ...], ...], datasets: Any) -> list[tuple[Any, str]]:
    """Fold entries missing from a listed ``data.datasets``, at (fold, index)."""
    if not _is_sequence(datasets):
        return []  # all datasets: the names are checked against the data once they are built
    return [
        ((fold, index), f"{name!r} is not among the fitted datasets (data.datasets)")
        for fold, names in enumerate(folds)
        for index, name in enumerate(names)
        if name not in datasets
    ]


def _replicas_form(value: Any) -> str | None:
    """Pick the form of ``replicas`` from the input, so errors come from that form only."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return "count"
    if _is_sequence(value):
        return "ids"
    return None


def _datasets_form(value: Any) -> str | None:
    """Pick the form of ``datasets`` from the input, so errors come from that form only."""
    if value == "all" and isinstance(value, str):
        return "all"
    if _is_sequence(value):
        return "names"
    return None


#: ``replicas: N`` fits replicas 1..N; ``replicas: [3, 7]`` fits exactly those replicas (the
#: replica id seeds its pseudodata and split, so replica 7 is the same in either runcard).
_ReplicaCount = Annotated[Int, Field(ge=1, le=MAX_REPLICAS), Tag("count")]
_ReplicaIds = Annotated[
    tuple[ReplicaId, ...],
    Field(min_length=1, max_length=MAX_REPLICAS),
    AfterValidator(_unique),
    Tag("ids"),
]
Replicas = Annotated[
    _ReplicaCount | _ReplicaIds,
    Discriminator(
        _replicas_form,
        custom_error_type=UNION_ERROR,
        custom_error_message="expected a number of replicas (an integer >= 1) "
        "or a non-empty list of distinct replica ids (integers >= 1)",
    ),
]

_AllDatasets = Annotated[Literal["all"], Tag("all")]
_DatasetNames = Annotated[
    tuple[Str, ...], Field(min_length=1), AfterValidator(_unique), Tag("names")
]
Datasets = Annotated[
    _AllDatasets | _DatasetNames,
    Discriminator(
        _datasets_form,
        custom_error_type=UNION_ERROR,
        custom_error_message="expected 'all' or a non-empty list of distinct dataset names",
    ),
]

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


# --------------------------------------------------------------------------------------------
# Sections


class _Section(BaseModel):
    """Base of every runcard model: immutable, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def _check_level1_fits(closure: ClosureSection | RealClosure) -> None:
    """Several fits of level-0 data would be the same fit repeated: a mistake, not a test."""
    if closure.fits > 1 and closure.level != 1:
        raise rule_error(
            f"{closure.fits} level-1 fits need level 1, got level {closure.level}", "fits"
        )


class ClosureSection(_Section):
    """Built-in closure-test data: pseudo-data generated from a known underlying PDF."""

    size: ClosureSize = "small"
    """Built-in closure data: `tiny` (4 datasets, 60 points), `small` (8, 300), `medium` (20, 1000),
    `nnpdf40` (82, 4618).
    """
    level: Annotated[Int, Field(ge=0, le=1)] = 1
    """0: data equal the underlying (truth) predictions; 1: data fluctuated once around them."""
    seed: Seed = 0
    """Seed of the level-1 fluctuation (shared by all replicas)."""
    fits: Annotated[Int, Field(ge=1, le=MAX_LEVEL1_FITS)] = 1
    """Level-1 fits in one fit (validphys' multiclosure): their data are fluctuated with seeds
    `seed`, `seed`+1, …, and the members are fits × (folds ×) replicas, each fitting its own fit's
    data; needs `level: 1`. A scan trial's closure figures average over the fits.
    """

    @model_validator(mode="after")
    def _fits_need_level1(self) -> ClosureSection:
        _check_level1_fits(self)
        return self


def _shipped_problems(entry: RealDatasetEntry) -> list[tuple[tuple[str, ...], str]]:
    """Why ``entry`` is not a shipped dataset and variant (empty when it is)."""
    from hyperscan.runcard.real_datasets import REAL_DATASETS, check_real_dataset

    if entry.dataset not in REAL_DATASETS:
        available = ", ".join(sorted(REAL_DATASETS))
        why = f"unknown real dataset {entry.dataset!r}; available: {available} (or name a theory"
        return [(("dataset",), why + " folder in data.real.theory)")]
    try:
        check_real_dataset(entry.dataset, entry.variant)
    except ValueError as err:
        return [(("variant",), str(err))]
    return []


class RealDatasetEntry(_Section):
    """One real dataset, as n3fit writes it: ``{dataset: NAME, variant: VARIANT}``."""

    dataset: Str
    """NNPDF commondata name: a shipped dataset or, with `theory`, any dataset of nnpdf-data
    4.1.5 whose FK tables the theory folder holds."""
    variant: Str | None = None
    """The commondata variant (BCDMS: `rzero`); null: the default. Each dataset ships with one
    variant; other variants of it need nnpdf-data (`pip install nnpdf-data==4.1.5`).
    """


def _all_real_datasets() -> tuple[RealDatasetEntry, ...]:
    from hyperscan.runcard.real_datasets import REAL_DATASETS

    return tuple(RealDatasetEntry(dataset=k, variant=v) for k, v in REAL_DATASETS.items())


def _unique_real(values: tuple[RealDatasetEntry, ...]) -> tuple[RealDatasetEntry, ...]:
    _unique(tuple(v.dataset for v in values))
    return values


class RealClosure(_Section):
    """Closure test on the real FK tables: data replaced by toy-PDF predictions."""

    level: Annotated[Int, Field(ge=0, le=1)] = 1
    """0: data equal the toy-PDF predictions; 1: data fluctuated once around them."""
    seed: Seed = 0
    """Seed of the level-1 fluctuation."""
    fits: Annotated[Int, Field(ge=1, le=MAX_LEVEL1_FITS)] = 1
    """Level-1 fits in one fit (validphys' multiclosure): their data are fluctuated with seeds
    `seed`, `seed`+1, …, and the members are fits × (folds ×) replicas, each fitting its own fit's
    data; needs `level: 1`. A scan trial's closure figures average over the fits.
    """

    @model_validator(mode="after")
    def _fits_need_level1(self) -> RealClosure:
        _check_level1_fits(self)
        return self


class RealSection(_Section):
    """Real DIS data shipped with hyperscan (NLO FK tables, NNPDF 4.1.5 commondata)."""

    datasets: Annotated[
        tuple[RealDatasetEntry, ...], Field(min_length=1), AfterValidator(_unique_real)
    ] = Field(default_factory=_all_real_datasets)
    """The datasets to fit, as `[{dataset: NAME, variant: VARIANT}]`; all 7 shipped DIS sets by
    default."""
    theory: Str | None = None
    """A theory folder as NNPDF's share folder lays it out (`theory_<ID>/fastkernel/<FK
    table>.pineappl.lz4`; this folder or the one holding it): `datasets` may then name any
    dataset of nnpdf-data 4.1.5 whose tables it holds, DIS or hadronic (docs/real-data.md).
    Needs nnpdf-data and pineappl (`pip install nnpdf-data==4.1.5 pineappl==1.5.0`)."""
    positivity: Annotated[tuple[Str, ...], AfterValidator(_unique)] = ()
    """Positivity sets of nnpdf-data whose tables `theory` holds, e.g.
    `[NNPDF_POS_2P24GEV_DYU, NNPDF_POS_2P24GEV_F2U]`: penalised as the `positivity` section
    says. None by default."""
    q2min: Annotated[Float, Field(ge=0)] = DEFAULT_Q2MIN
    """DIS cut Q² > q2min (GeV²)."""
    w2min: Annotated[Float, Field(ge=0)] = DEFAULT_W2MIN
    """DIS cut W² = Q²(1−x)/x > w2min (GeV²)."""
    t0: Bool = True
    """t0 covariance (MULT systematics rescaled by the toy-PDF predictions over the data); false:
    experimental.
    """
    closure: RealClosure | None = None
    """`{level, seed, fits}`: a closure test on the real FK tables (data = toy-PDF predictions);
    null fits the measured data.
    """

    @model_validator(mode="after")
    def _shipped_without_theory(self) -> RealSection:
        if self.positivity and self.theory is None:
            raise rule_error(
                "positivity sets are read from a theory folder: give `theory`", "positivity"
            )
        if self.theory is None:
            fail_at(
                [
                    (("datasets", i, *loc), message)
                    for i, entry in enumerate(self.datasets)
                    for loc, message in _shipped_problems(entry)
                ],
                self,
            )
        return self


class DataSection(_Section):
    """Which data are fitted and how each replica sees them.

    Exactly one of ``closure`` (built-in closure data, the default) and ``real``.
    """

    closure: ClosureSection | None = Field(default_factory=ClosureSection)
    """Built-in closure-test data: pseudo-data generated from a known underlying PDF. Exactly one of
    `closure` and `real` is given; writing `real` alone clears it.
    """
    real: RealSection | None = None
    """Instead of `closure`: the shipped real DIS data (NLO FK tables, NNPDF 4.1.5 commondata); `{}`
    = all 7 sets.
    """
    datasets: Datasets = "all"
    """`all`, or a list of the dataset names to fit."""
    training_fraction: Annotated[Float, Field(gt=0, le=1)] = 0.75
    """Per dataset, per replica: floor(fraction · points) train, as in n3fit (a dataset too small
    for one trains a point with this probability); the rest validate (stopping).
    """
    pseudodata: Bool = True
    """Each replica fits its own fluctuated data (replica method): a Gaussian draw from the
    covariance it is fitted with (t0 for real data), as n3fit 4.1.5 draws by default
    (`use_t0_sampling`, no `separate_multiplicative`, no `resample_negative_pseudodata`); false
    fits the central data everywhere.
    """

    @model_validator(mode="before")
    @classmethod
    def _real_replaces_closure(cls, data: Any) -> Any:
        """``real:`` alone means no built-in closure data (the dump writes ``closure: null``)."""
        if isinstance(data, dict) and data.get("real") is not None and "closure" not in data:
            return {**data, "closure": None}
        return data

    @model_validator(mode="after")
    def _one_source(self) -> DataSection:
        if self.closure is not None and self.real is not None:
            raise rule_error("give either 'closure' or 'real', not both", "real")
        if self.closure is None and self.real is None:
            raise rule_error("give one of 'closure' or 'real'", "closure")
        return self

    @property
    def level1_fits(self) -> int:
        """How many level-1 fits each fit's members are spread over (closure ``fits``; 1
        without closure data)."""
        closure = self.closure if self.real is None else self.real.closure
        return 1 if closure is None else closure.fits


class Seeds(_Section):
    """Base seeds; each is combined with the replica id so replicas are reproducible alone."""

    data: Seed = 1
    """Base seed of each replica's pseudodata, combined with the replica id."""
    split: Seed = 2
    """Base seed of each replica's training/validation split, combined with the replica id."""
    network: Seed = 3
    """Base seed of each replica's weights and preprocessing exponents, combined with the replica
    id: a replica does not depend on what else is batched.
    """


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


class DivergenceSection(_Section):
    """When a replica counts as diverged (and is dropped rather than poisoning the ensemble)."""

    max_loss: PositiveFloat = 1.0e10
    """A member whose loss exceeds this, or is not finite, is diverged and frozen; a start already
    past it (about 1 random draw in 100) is redrawn from the member's own seed, up to 10 times,
    and `results.json` says `redrawn_starts`.
    """


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


# --------------------------------------------------------------------------------------------
# Per-replica methodologies

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


def _check_methodologies(model: type[FitRuncard], data: Any) -> Any:
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


# --------------------------------------------------------------------------------------------
# The runcard


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
        return _check_methodologies(cls, data)

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
