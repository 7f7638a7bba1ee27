# SPDX-License-Identifier: GPL-3.0-or-later
"""The ``data`` section: which data are fitted (built-in closure data or real data) and how each
replica sees them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Discriminator, Field, Tag, model_validator

from ._base import (
    MAX_LEVEL1_FITS,
    UNION_ERROR,
    Bool,
    Float,
    Int,
    Seed,
    Str,
    _is_sequence,
    _Section,
    _unique,
    fail_at,
    rule_error,
)

#: Standard DIS cuts of NNPDF (validphys ``q2min``, ``w2min``; W2 = Q2 (1 - x) / x), GeV^2:
#: the defaults of ``data.real`` and of the data layer's real-data loaders.
DEFAULT_Q2MIN = 3.49
DEFAULT_W2MIN = 12.5

ClosureSize = Literal["tiny", "small", "medium", "nnpdf40"]


def _datasets_form(value: Any) -> str | None:
    """Pick the form of ``datasets`` from the input, so errors come from that form only."""
    if value == "all" and isinstance(value, str):
        return "all"
    if _is_sequence(value):
        return "names"
    return None


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


class _Level1(_Section):
    """The settings both closure tests share: data made from a known truth, fluctuated or not."""

    level: Annotated[Int, Field(ge=0, le=1)] = 1
    """0: data equal the underlying (truth) PDF's predictions, the toy PDF's on the real tables;
    1: data fluctuated once around them.
    """
    seed: Seed = 0
    """Seed of the level-1 fluctuation (shared by all replicas)."""
    fits: Annotated[Int, Field(ge=1, le=MAX_LEVEL1_FITS)] = 1
    """Level-1 fits in one fit (validphys' multiclosure): their data are fluctuated with seeds
    `seed`, `seed`+1, …, and the members are fits × (folds ×) replicas, each fitting its own fit's
    data; needs `level: 1`. A scan trial's closure figures average over the fits.
    """

    @model_validator(mode="after")
    def _fits_need_level1(self) -> _Level1:
        """Several fits of level-0 data would be the same fit repeated: a mistake, not a test."""
        if self.fits > 1 and self.level != 1:
            raise rule_error(
                f"{self.fits} level-1 fits need level 1, got level {self.level}", "fits"
            )
        return self


class _BuiltinData(_Section):
    """``size`` in a base of its own: a model lists its bases' fields first, so that
    :class:`ClosureSection` keeps it before the level-1 keys (in dumps and errors)."""

    size: ClosureSize = "small"
    """Built-in closure data: `tiny` (4 datasets, 60 points), `small` (8, 300), `medium` (20, 1000),
    `nnpdf40` (82, 4618).
    """


class ClosureSection(_Level1, _BuiltinData):
    """Built-in closure-test data: pseudo-data generated from a known underlying PDF."""


class RealClosure(_Level1):
    """Closure test on the real FK tables: data replaced by toy-PDF predictions."""


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
    from hyperscan.runcard.real_datasets import DIS_DATASETS

    return tuple(RealDatasetEntry(dataset=k, variant=v) for k, v in DIS_DATASETS.items())


def _preset(value: Any) -> Any:
    """A preset's name stands for its shipped datasets, each in its shipped variant; a runcard
    dumped after validation lists them, so it does not depend on what a preset holds later."""
    if not isinstance(value, str):
        return value
    from hyperscan.runcard.real_datasets import PRESETS, REAL_DATASETS

    if value not in PRESETS:
        raise rule_error(
            f"unknown preset {value!r}; expected one of {', '.join(map(repr, PRESETS))} or a "
            "list of {dataset, variant}"
        )
    return tuple({"dataset": n, "variant": REAL_DATASETS[n]} for n in PRESETS[value])


def _unique_real(values: tuple[RealDatasetEntry, ...]) -> tuple[RealDatasetEntry, ...]:
    _unique(tuple(v.dataset for v in values))
    return values


class RealSection(_Section):
    """Real data shipped with hyperscan (FK tables of theory 99000001, NNPDF 4.1.5 commondata)."""

    datasets: Annotated[
        tuple[RealDatasetEntry, ...],
        Field(min_length=1),
        AfterValidator(_unique_real),
        BeforeValidator(
            _preset,
            json_schema_input_type=Literal["dis", "dis+hadronic"]
            | Annotated[list[RealDatasetEntry], Field(min_length=1)],
        ),
    ] = Field(default_factory=_all_real_datasets)
    """The datasets to fit, as `[{dataset: NAME, variant: VARIANT}]`, or a preset: `dis` (the 7
    shipped NLO DIS sets, the default) or `dis+hadronic` (those and the 5 shipped hadronic sets,
    LO partonic cross sections: E866 pd/pp and pp, CDF and D0 Z rapidity, D0 W asymmetry)."""
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
    """Instead of `closure`: the shipped real data (FK tables of theory 99000001, NNPDF 4.1.5
    commondata); `{}` = the 7 NLO DIS sets, `{datasets: dis+hadronic}` adds the 5 LO hadronic ones.
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
