# SPDX-License-Identifier: GPL-3.0-or-later
"""Typed schema of a *scan* runcard: a fit part and a ``scan:`` section.

The fit part is the base runcard of every trial; ``scan.space`` (:class:`Space`) says which of
its settings a trial draws, and from what. In YAML the fit part's keys stand at the top level
beside ``scan:``, and errors name them as a fit runcard's: ``training.epochs``, not
``fit.training.epochs``.

Dataset names in ``scan.folds`` can only be checked against ``data.datasets`` here; whether they
exist in the data is checked by the scan service, which knows the data.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from ._base import (
    MAX_REPLICAS,
    Float,
    Inlined,
    Int,
    PositiveFloat,
    PositiveInt,
    Seed,
    _Section,
    fail_at,
    rule_error,
)
from ._fit import FitRuncard
from ._load import _load, _parse, _parse_yaml, _read, _validate
from ._replicas import Fold, check_disjoint_folds, folds_outside
from ._space import Space

__all__ = [
    "CLOSURE_LOSSES",
    "LOSSES",
    "N3FIT_LOSSES",
    "PENALTIES",
    "ObjectiveEntry",
    "ObjectiveSection",
    "PrunerSection",
    "SamplerSection",
    "ScanDivergenceSection",
    "ScanRuncard",
    "ScanSection",
    "load_runcard",
    "load_scan_runcard",
    "parse_scan_runcard",
    "scan_runcard_from_dict",
]


@dataclass(frozen=True)
class Loss:
    """A trial loss: its family, which decides how a trial is scored (``hyperscan.score``
    dispatches on it) and which objective keys go with it, and its value in words."""

    family: Literal["statistic", "n3fit", "closure"]
    label: str
    """Formatted with the objective section's fields, and ``best`` (the best replicas in
    words) and ``phi`` (φ or φ²)."""
    axis: str
    """Short, for a figure's axis."""


#: Every loss a runcard may name: hyperscan's χ² statistic, n3fit 4.1.5's hyperopt losses
#: (``loss_type``, each a figure of a fold's ensemble), and the closure losses (NNPDF's closure
#: estimators of a fold's ensemble against the known truth of closure data, lower is better).
#: The one table behind the runcard's checks, the scoring and the labels.
LOSSES = {
    "statistic": Loss(
        "statistic", "{statistic} of the replicas' {chi2_words} chi2 per point", "χ² per point"
    ),
    "chi2": Loss(
        "n3fit", "n3fit's chi2 loss ({replica_statistic} over the replicas)", "n3fit χ² loss"
    ),
    "phi2": Loss("n3fit", "n3fit's phi2 ({phi} of the {best})", "1 / φ (n3fit phi2 loss)"),
    "logp": Loss("n3fit", "n3fit's logp (of the {best})", "n3fit logp loss"),
    "chi2p": Loss("n3fit", "n3fit's chi2p (of the {best})", "n3fit χ²p loss"),
    "bias": Loss(
        "closure", "closure bias (the mean's chi2 per point to the truth)", "closure bias"
    ),
    "variance": Loss(
        "closure",
        "closure variance (the replicas' chi2 per point to their mean)",
        "closure variance",
    ),
    "rbv": Loss("closure", "|log R_bv|, R_bv = sqrt(bias / variance)", "|log R_bv|"),
    "xi1sigma": Loss(
        "closure", "|xi_1sigma - 0.6827| (truth within the replicas' 1 sigma)", "|ξ₁σ − 0.683|"
    ),
}
N3FIT_LOSSES = tuple(name for name, loss in LOSSES.items() if loss.family == "n3fit")
CLOSURE_LOSSES = tuple(name for name, loss in LOSSES.items() if loss.family == "closure")
#: n3fit's hyperopt penalties, stored per replica on every trial.
PENALTIES = ("saturation", "patience", "integrability")


class ObjectiveSection(_Section):
    """The loss of a trial: hyperscan's χ² statistic (a χ² per replica, reduced across
    replicas, then across folds), one of n3fit's hyperopt losses of each fold's ensemble, or
    a closure estimator of it."""

    loss: Literal[tuple(LOSSES)] = "statistic"  # type: ignore[valid-type]
    """`statistic`: hyperscan's χ² statistic (`chi2`, then `statistic` across replicas);
    n3fit 4.1.5's losses of each fold's ensemble (its best `best_fraction` of the replicas):
    `chi2` (n3fit's: validation χ² of the best replicas + max(held-out χ² of the best
    1 − best_fraction, 2) − 2), `phi2` (φ as n3fit's code computes it, maximised: the trial
    value is 1 / fold_statistic(φ)), `logp`, `chi2p` (docs/objectives.md). With n3fit's losses
    the trial value adds n3fit's fit-quality term, 100·elu(χ² of the fitted data − 1.2).
    Closure data only (a known truth): `bias`, `variance`, `rbv` (|log R_bv|), `xi1sigma`
    (|ξ₁σ − 0.6827|) of each fold's ensemble, `fold_statistic` over the folds, lower is better
    (docs/objectives.md).
    """
    phi_squared: bool = False
    """`loss: phi2` with φ² per fold instead of φ: the loss as NNPDF's documentation writes it
    (n3fit 4.1.5's code, the default, uses φ)."""
    chi2: Literal["validation", "held_out"] = "validation"
    """`validation`; `held_out` (needs folds; the default with them) scores each fold on its
    held-out datasets: each replica's χ² per point there, against the central data with the fit's
    covariance (n3fit's per-replica `experimental_loss`). For `loss: statistic`.
    """
    statistic: Literal["mean", "median", "trimmed_mean", "max", "mean_plus_std"] = "mean"
    """Across replicas, for `loss: statistic`: mean, median, trimmed_mean, max, mean_plus_std."""
    best_fraction: Annotated[Float, Field(gt=0, le=1)] = 0.85
    """For `trimmed_mean`: the mean over this fraction of the replicas, best first; also the
    replicas (best by validation χ²) of the `ensemble` metrics and n3fit's losses, n3fit's
    reduce_proportion."""
    std_weight: Annotated[Float, Field(ge=0)] = 1.0
    """For `mean_plus_std`: k in mean + k·std."""
    replica_statistic: Literal["average", "average_best", "best_worst", "std"] = "average"
    """Across replicas, for `loss: chi2` (n3fit's names): average (average_best is the same in
    n3fit 4.1.5), best_worst (the maximum), std."""
    fold_statistic: Literal[
        "mean", "median", "max", "average", "average_best", "best_worst", "std"
    ] = "mean"
    """Across folds: mean, median, max, or n3fit's names average (= average_best = mean),
    best_worst (= max), std. With `loss: phi2` the trial value is its reciprocal, as in n3fit.
    """
    penalties: tuple[Literal["saturation", "patience", "integrability"], ...] = ()
    """n3fit's penalties added to an n3fit loss with `penalties_in_loss` (each trial stores all
    three per replica anyway): saturation (small-x slope), patience (best epoch far from
    epochs − patience), integrability (the size of x·f at small x)."""
    penalties_in_loss: bool = False
    """Add `penalties` to the loss as n3fit does: per replica to the held-out χ² of
    `loss: chi2`, their replica averages to phi2 and logp (n3fit adds none to chi2p)."""
    threshold: PositiveFloat | None = None
    """n3fit's fold threshold: a trial any fold of which has a loss above this is trashed, with
    its reason (n3fit's default is 50); null: none."""

    @model_validator(mode="after")
    def _used_keys(self) -> ObjectiveSection:
        """Keys that mean nothing for the chosen loss are refused, not silently ignored. By
        value, not by presence: a stored runcard is dumped with every key."""
        problems: list[tuple[tuple[Any, ...], str]] = []
        family = LOSSES[self.loss].family
        n3fit = family == "n3fit"
        if family != "statistic" and self.statistic != "mean":
            problems.append(
                (
                    ("statistic",),
                    f"is for loss 'statistic', not '{self.loss}'"
                    + (" (use replica_statistic)" if n3fit else ""),
                )
            )
        if self.loss != "chi2" and self.replica_statistic != "average":
            problems.append(
                (("replica_statistic",), f"is for loss 'chi2' (n3fit's), not '{self.loss}'")
            )
        if self.phi_squared and self.loss != "phi2":
            problems.append((("phi_squared",), f"is for loss 'phi2', not '{self.loss}'"))
        if not n3fit and (self.penalties or self.penalties_in_loss):
            key = "penalties" if self.penalties else "penalties_in_loss"
            problems.append(
                ((key,), "penalties enter n3fit's losses only: give loss chi2, phi2, logp or chi2p")
            )
        if self.penalties_in_loss and self.loss == "chi2p":
            problems.append(
                (
                    ("penalties_in_loss",),
                    "n3fit 4.1.5 adds no penalty to 'chi2p' (only to chi2, phi2 and logp)",
                )
            )
        if self.penalties_in_loss and not self.penalties:
            problems.append(
                (("penalties_in_loss",), "adds the listed penalties, but 'penalties' is empty")
            )
        fail_at(problems, self)
        return self

    # ---- multi-objective scans: kept apart from the single loss's keys above

    objectives: tuple[ObjectiveEntry, ...] = ()
    """Two or more objectives make a multi-objective study (Pareto front; no pruning): each
    entry has the keys above for its own loss, a `name` (default: its loss) and a `direction`
    (minimize, the default, or maximize); `best_fraction` and `threshold` stay here, shared.
    Empty: one objective, the keys above (docs/objectives.md)."""

    @model_validator(mode="after")
    def _multi(self) -> ObjectiveSection:
        """A multi-objective list of two or more distinct, named objectives, whose loss
        settings are their own: keys here that only one loss uses are refused beside it."""
        if not self.objectives:
            return self
        problems: list[tuple[tuple[Any, ...], str]] = []
        if len(self.objectives) < 2:
            problems.append(
                (
                    ("objectives",),
                    "a multi-objective scan needs two or more objectives, got 1: give a single "
                    "objective's keys in scan.objective itself",
                )
            )
        for key in sorted(set(type(self).model_fields) - _SHARED - {"objectives"}):
            if getattr(self, key) != type(self).model_fields[key].default:
                problems.append(
                    (
                        (key,),
                        "is an objective's own setting: with 'objectives' give it in each "
                        "entry that needs it",
                    )
                )
        seen: dict[str, int] = {}
        settings: dict[str, int] = {}
        for k, entry in enumerate(self.objectives):
            if entry.name in seen:
                problems.append(
                    (
                        ("objectives", k, "name"),
                        f"duplicates objective {seen[entry.name]}'s name {entry.name!r}: give "
                        "each objective its own 'name'",
                    )
                )
            seen.setdefault(entry.name, k)
            same = entry.model_dump_json(exclude={"name", "direction"})
            if same in settings:
                problems.append(
                    (
                        ("objectives", k),
                        f"is the same objective as objectives[{settings[same]}] (only its name "
                        "or direction differs): remove one",
                    )
                )
            settings.setdefault(same, k)
        fail_at(problems, self)
        return self

    @property
    def multi(self) -> bool:
        """Whether the scan is multi-objective."""
        return bool(self.objectives)

    @property
    def entries(self) -> tuple[ObjectiveSection, ...]:
        """Each objective's settings, in order, with the trial's shared keys (best_fraction,
        threshold): the section itself for a single objective."""
        shared = {key: getattr(self, key) for key in _SHARED}
        return tuple(e.model_copy(update=shared) for e in self.objectives) or (self,)

    @property
    def names(self) -> tuple[str, ...]:
        """Each objective's name (`value` for a single objective)."""
        return tuple(e.name for e in self.objectives) or ("value",)

    @property
    def directions(self) -> tuple[str, ...]:
        """Each objective's Optuna direction."""
        return tuple(e.direction for e in self.objectives) or ("minimize",)


#: Keys of the trial as a whole (its ensemble records, its fold threshold), not of one of its
#: objectives: a multi-objective scan gives them in scan.objective, not in its entries.
_SHARED = frozenset({"best_fraction", "threshold"})
#: Keys an entry inherits but does not take: the shared ones (`ObjectiveSection.entries` fills
#: them in, for scoring) and `objectives` (they do not nest).
_NOT_ENTRY_KEYS = _SHARED | {"objectives"}
#: An objective's name, as `hyperscan export --rule` refers to it.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _without_inherited_keys(schema: dict[str, Any]) -> None:
    """An entry's JSON Schema lists only the keys an entry takes; so does the reference, made
    from it, and an editor flags the others."""
    for key in _NOT_ENTRY_KEYS:
        del schema["properties"][key]


class ObjectiveEntry(ObjectiveSection):
    """One objective of a multi-objective scan: a loss, with its name and direction."""

    model_config = ConfigDict(json_schema_extra=_without_inherited_keys)

    name: str = ""
    """The objective's name in status, the report and `export --rule` (letters, digits, _;
    default: its loss)."""
    direction: Literal["minimize", "maximize"] = "minimize"
    """minimize or maximize (every loss is a loss: minimize it, unless it is a figure of merit
    you want high)."""
    objectives: tuple[()] = Field(default=(), exclude=True)
    """Not in an entry: objectives do not nest."""

    @model_validator(mode="before")
    @classmethod
    def _named(cls, data: Any) -> Any:
        """An unnamed objective is named after its loss."""
        if isinstance(data, Mapping) and not data.get("name"):
            return {**data, "name": data.get("loss", "statistic")}
        return data

    @model_validator(mode="after")
    def _entry(self) -> ObjectiveEntry:
        problems: list[tuple[tuple[Any, ...], str]] = []
        if not _NAME.fullmatch(self.name):
            problems.append(
                (
                    ("name",),
                    f"{self.name!r} is not a name: letters, digits and _, not first a digit",
                )
            )
        for key in sorted(_SHARED):
            if getattr(self, key) != type(self).model_fields[key].default:
                problems.append(
                    (
                        (key,),
                        "is the trial's, shared by its objectives: give it in scan.objective",
                    )
                )
        fail_at(problems, self)
        return self


ObjectiveSection.model_rebuild()


class SamplerSection(_Section):
    """The Optuna sampler; a null seed draws a fresh one."""

    name: Literal["tpe", "random", "gp", "cmaes", "nsga2"] = "tpe"
    """The Optuna sampler: tpe, random, gp (needs torch, scipy), cmaes (needs cmaes; single
    objective only), nsga2 (NSGA-II, for multi-objective scans; tpe handles them too)."""
    seed: Seed | None = 0
    """With a seed, `hyperscan scan --workers 1` on a new study draws the same trials again (a
    resumed study draws new ones; parallel workers salt the seed, each its own way); null draws a
    fresh one.
    """


class PrunerSection(_Section):
    """The Optuna pruner and how often a trial reports to it."""

    name: Literal["median", "hyperband", "none"] = "median"
    """The Optuna pruner: median, hyperband, none."""
    report_every: PositiveInt = 5
    """Device calls (of `training.steps_per_call` steps) between the trial's reports of its
    statistic.
    """
    warmup_reports: Annotated[Int, Field(ge=0)] = 2
    """Reports a trial makes before it may be pruned: the median pruner may stop a trial from its
    report warmup_reports + 1 on.
    """


class ScanDivergenceSection(_Section):
    """When a trial is trashed (never eligible as best) because replicas failed."""

    max_diverged: Annotated[Int, Field(ge=0)] = 0
    """More diverged replicas than this trash the trial (never eligible as best)."""
    max_pos_veto: Annotated[Int, Field(ge=0)] | None = None
    """More pos-veto replicas (no step passed positivity and the χ² threshold, which postfit would
    discard) than this trash the trial; null: no limit, as n3fit's hyperopt.
    """


class ScanSection(_Section):
    """How a study searches: budget, trial size, k-fold, objective, Optuna settings, space."""

    trials: PositiveInt = 50
    """Study budget of finished trials (complete, pruned and trashed; trials running when it is
    reached still finish: up to workers − 1 more). The only key a study's runcard may change:
    `study create` or `scan` with a new value changes the budget (running workers take it after
    their trial).
    """
    replicas: Annotated[Int, Field(ge=1, le=MAX_REPLICAS)] = 4
    """Replicas per trial (and per fold); a top-level `replicas` (a fit runcard's) is refused in a
    new scan.
    """
    folds: tuple[Fold, ...] = ()
    """k-fold partition by dataset: a list of lists of dataset names (the top-level `folds` is
    refused in a scan); empty: no k-fold.
    """
    objective: ObjectiveSection = Field(default_factory=ObjectiveSection)
    """The loss of a trial: hyperscan's χ² statistic, or one of n3fit's hyperopt losses."""
    sampler: SamplerSection = Field(default_factory=SamplerSection)
    """The Optuna sampler."""
    pruner: PrunerSection = Field(default_factory=PrunerSection)
    """The Optuna pruner, and how often a trial reports to it."""
    divergence: ScanDivergenceSection = Field(default_factory=ScanDivergenceSection)
    """When a trial is trashed because replicas failed."""
    space: Space
    """The search space: what each trial draws. Every entry is optional, but at least one must be
    given.
    """

    @model_validator(mode="before")
    @classmethod
    def _held_out_with_folds(cls, data: Any) -> Any:
        """A k-fold scan scores the held-out folds unless its objective says otherwise (each
        objective of a multi-objective scan)."""
        if isinstance(data, Mapping) and data.get("folds"):
            objective = data.get("objective", {})
            entries = objective.get("objectives") if isinstance(objective, Mapping) else None
            if isinstance(entries, list | tuple) and entries:
                held_out = [
                    {**e, "chi2": "held_out"} if isinstance(e, Mapping) and "chi2" not in e else e
                    for e in entries
                ]
                return {**data, "objective": {**objective, "objectives": held_out}}
            if isinstance(objective, Mapping) and "chi2" not in objective:
                return {**data, "objective": {**objective, "chi2": "held_out"}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _no_pruner_for_many(cls, data: Any) -> Any:
        """Optuna prunes single-objective studies only: a multi-objective scan without a
        pruner section gets none (one that asks for a pruner is refused below)."""
        if isinstance(data, Mapping) and "pruner" not in data:
            objective = data.get("objective")
            if isinstance(objective, Mapping) and objective.get("objectives"):
                return {**data, "pruner": {"name": "none"}}
        return data

    @field_validator("folds")
    @classmethod
    def _disjoint(cls, value: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
        check_disjoint_folds(value, "scan.folds")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ScanSection:
        problems: list[tuple[tuple[Any, ...], str]] = []
        # n3fit's count of the best replicas, as the ensemble metrics take it (best_replicas)
        used = math.ceil(self.objective.best_fraction * self.replicas)
        for k, entry in enumerate(self.objective.entries):
            at = ("objective", "objectives", k) if self.objective.multi else ("objective",)
            if entry.chi2 == "held_out" and not self.folds:
                problems.append(
                    (
                        (*at, "chi2"),
                        "'held_out' scores each fold on its held-out datasets, so it needs "
                        "'scan.folds'; give folds or use 'validation'",
                    )
                )
            if entry.loss == "phi2" and used < 2:
                problems.append(
                    (
                        (*at, "loss"),
                        "'phi2' is the spread of a fold's replicas, so it needs at least 2 of "
                        f"them: scan.replicas {self.replicas} x best_fraction "
                        f"{self.objective.best_fraction:g} keeps {used}",
                    )
                )
        if self.objective.multi and self.pruner.name != "none":
            problems.append(
                (
                    ("pruner", "name"),
                    "Optuna cannot prune a multi-objective study (scan.objective.objectives): "
                    "remove scan.pruner, or give name: none (the trash rule still applies)",
                )
            )
        if self.objective.multi and self.sampler.name == "cmaes":
            problems.append(
                (
                    ("sampler", "name"),
                    "cmaes optimises one objective: a multi-objective scan takes tpe, nsga2, "
                    "gp or random",
                )
            )
        if self.objective.loss in CLOSURE_LOSSES and self.replicas < 2:
            problems.append(
                (
                    ("objective", "loss"),
                    f"'{self.objective.loss}' is a closure estimator of a fold's replicas, whose "
                    f"variance needs at least 2 of them: scan.replicas is {self.replicas}",
                )
            )
        for key, failed in (("max_diverged", "diverged"), ("max_pos_veto", "was vetoed")):
            limit = getattr(self.divergence, key)
            if limit is not None and limit >= self.members:
                problems.append(
                    (
                        ("divergence", key),
                        f"must be < {self.members}, the replicas of a trial (folds x replicas), "
                        f"got {limit}: otherwise a trial whose every replica {failed} would "
                        "count",
                    )
                )
        fail_at(problems, self)
        return self

    @property
    def members(self) -> int:
        """Replicas fitted by one trial: folds x replicas (one fold without k-fold)."""
        return max(1, len(self.folds)) * self.replicas

    @property
    def replica_ids(self) -> tuple[int, ...]:
        """The replica ids of each trial (and fold): 1..``replicas``."""
        return tuple(range(1, self.replicas + 1))


# --------------------------------------------------------------------------------------------
# The scan runcard


class ScanRuncard(_Section):
    """A fit part (the base runcard of every trial) and the ``scan:`` section saying what
    varies. A runcard writes the fit part's keys at its top level, beside ``scan:``."""

    fit: Annotated[FitRuncard, Inlined(without=("methodologies",))]
    scan: ScanSection

    @model_validator(mode="before")
    @classmethod
    def _fit_keys_beside_scan(cls, data: Any) -> Any:
        """Every top-level key but ``scan`` belongs to the fit part (unless it is given as a
        :class:`FitRuncard` already, as ``ScanRuncard(fit=..., scan=...)`` does)."""
        if isinstance(data, Mapping) and data.get("methodologies"):
            raise rule_error(
                "a scan runcard has no per-replica methodologies: each trial draws its own "
                "from scan.space (`hyperscan export --sample` makes a fit runcard with them)",
                "methodologies",
            )
        training = data.get("training") if isinstance(data, Mapping) else None
        if isinstance(training, Mapping) and training.get("batch_layout") is not None:
            raise rule_error(
                "a scan runcard has no training.batch_layout: `export` writes one into a "
                "trial's fit runcard, where the scan fitted it",
                "training",
            )
        if isinstance(data, Mapping) and not isinstance(data.get("fit"), FitRuncard):
            parts: dict[str, Any] = {"fit": {k: v for k, v in data.items() if k != "scan"}}
            if "scan" in data:
                parts["scan"] = data["scan"]
            return parts
        return data

    @model_serializer(mode="wrap")
    def _fit_keys_at_top(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Dumped as written: the fit part's keys, then ``scan``."""
        data = handler(self)
        fit = {key: value for key, value in data["fit"].items() if key != "methodologies"}
        return {**fit, "scan": data["scan"]}

    @model_validator(mode="after")
    def _fits_the_base(self) -> ScanRuncard:
        """Checks that need the base runcard's values."""
        problems: list[tuple[tuple[Any, ...], str]] = []
        for loc, message in folds_outside(self.scan.folds, self.fit.data.datasets):
            problems.append((("scan", "folds", *loc), message))
        if self.fit.folds:
            problems.append(
                (
                    ("folds",),
                    "a scan's folds are part of its objective: give them as 'scan.folds'",
                )
            )
        loss = self.scan.objective.loss
        real = self.fit.data.real
        if loss in CLOSURE_LOSSES and real is not None and real.closure is None:
            problems.append(
                (
                    ("scan", "objective", "loss"),
                    f"'{loss}' compares the ensemble with the truth of closure data, and real "
                    "data have none: give 'data.real.closure' ({level, seed}: a closure test "
                    "on the real FK tables) or built-in 'data.closure', or another loss",
                )
            )
        space = self.scan.space
        activations = self.fit.architecture.activations
        if space.layers is not None and space.activation is None and len(set(activations)) > 1:
            problems.append(
                (
                    ("scan", "space", "layers"),
                    "with a searched number of layers every layer needs the same activation, "
                    f"but architecture.activations is [{', '.join(activations)}]; give "
                    "'scan.space.activation' or one activation in the base runcard",
                )
            )
        for loc, message in space.problems_on(self.fit):
            problems.append((("scan", "space", *loc), message))
        fail_at(problems, self)
        return self

    @property
    def trial_base(self) -> FitRuncard:
        """The fit runcard every trial starts from: the fit part fitting replicas
        1..``scan.replicas`` of each of ``scan.folds``; what one batched model of trials
        shares (fit/_slots.py) is its own."""
        return self.fit.model_copy(
            update={"replicas": self.scan.replica_ids, "folds": self.scan.folds}
        )

    def trial_runcard(self, params: Mapping[str, Any]) -> FitRuncard:
        """The fit runcard of a trial: `trial_base` with the trial's parameters applied
        (:meth:`Space.apply`)."""
        return self.scan.space.apply(self.trial_base, params)

    def __hash__(self) -> int:
        return hash((type(self), self.model_dump_json()))


# --------------------------------------------------------------------------------------------
# Entry points


def load_scan_runcard(path: str | os.PathLike[str]) -> ScanRuncard:
    """Read and validate a scan runcard file; raises :class:`RuncardError`."""
    return _load(ScanRuncard, path)


def parse_scan_runcard(text: str, source: str = "<string>") -> ScanRuncard:
    """Validate scan-runcard YAML text; ``source`` names it in error messages."""
    return _parse(ScanRuncard, text, source)


def scan_runcard_from_dict(data: dict[str, Any], source: str = "<dict>") -> ScanRuncard:
    """Validate already-parsed scan-runcard data."""
    return _validate(ScanRuncard, data, source)


def load_runcard(path: str | os.PathLike[str]) -> FitRuncard | ScanRuncard:
    """Read a fit or scan runcard: a scan runcard is one whose top level has ``scan``."""
    text, name = _read(path)
    data = _parse_yaml(text, name, name)
    model = ScanRuncard if isinstance(data, dict) and "scan" in data else FitRuncard
    return _validate(model, data, name, name)
