"""Studies that carry their own runcard and data fingerprint, so a worker needs only a name."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial

from hyperscan._version import __version__
from hyperscan.data import Problem, empty_folds, load_problem, unknown_names, untrained_members
from hyperscan.runcard import (
    Choices,
    FitRuncard,
    Range,
    RuncardError,
    ScanRuncard,
    dump_runcard,
    parse_scan_runcard,
)
from hyperscan.scan._quiet import quiet_optuna
from hyperscan.scan.storage import (
    describe_error,
    errors_described,
    load_study,
    storage_url,
    study_names,
)

#: The study attribute holding its scan runcard (YAML), which makes a worker need only a name.
RUNCARD_ATTR = "hyperscan:runcard"
FINGERPRINT_ATTR = "hyperscan:data_fingerprint"
VERSION_ATTR = "hyperscan:version"
ENGINE_ATTR = "hyperscan:engine"
#: By trial number, what `export --confirm` measured (a finished trial's attributes are final).
CONFIRMED_ATTR = "hyperscan:confirmed"
#: What `study noise` measured: the spreads of a value, and each trial's refits.
NOISE_ATTR = "hyperscan:noise"
#: Bumped whenever the same runcard would give trials of another meaning (2: n3fit's stopping,
#: positivity test, per-variable clipping, split and held-out scoring). Studies older than
#: revisions carry none: 1.
ENGINE = 2

# Samplers that need packages hyperscan does not install: checked before anything is written.
_SAMPLER_PACKAGES = {"gp": ("torch", "scipy"), "cmaes": ("cmaes",)}


class ScanError(Exception):
    """A user-facing problem with a study (mismatch, no complete trial, ...)."""


@dataclass(frozen=True)
class Creation:
    """What :func:`create_study` did."""

    created: bool
    #: The budget (scan.trials) an existing study had, when the runcard changed it.
    old_budget: int | None = None


@dataclass(frozen=True)
class StudySetup:
    """A study with the runcard it carries; :func:`study_problem` builds its data."""

    study: optuna.Study
    runcard: ScanRuncard
    url: str  # the storage, password redacted


def check_runcard(runcard: ScanRuncard, problem: Problem, source: str) -> None:
    """Checks that need the data or the environment; the schema checked everything else."""
    folds = {f"scan.folds[{k}]": fold for k, fold in enumerate(runcard.scan.folds)}
    problems = unknown_names(folds, problem)
    if not problems:  # names all known: a fold must leave something to train on
        problems += empty_folds(runcard.scan.folds, problem, "scan.folds")
    if not problems:  # load_problem checked the base fraction without folds
        searched = runcard.scan.space.parameters.get("data.training_fraction")
        lowest = runcard.fit.data.training_fraction if searched is None else _lowest(searched)
        if runcard.scan.folds or lowest < runcard.fit.data.training_fraction:
            found = untrained_members(
                problem,
                runcard.scan.replica_ids,
                runcard.scan.folds,
                runcard.fit.seeds.split,
                lowest,
            )
            key = "data.training_fraction" if searched is None else _FRACTION_KEY
            problems += [(key, message) for _, message in found]
    if runcard.scan.objective.chi2 == "validation":
        problems += _validation_points(runcard)
    problems += runcard.scan.space.joint_problems(runcard.fit)
    missing = [
        package
        for package in _SAMPLER_PACKAGES.get(runcard.scan.sampler.name, ())
        if importlib.util.find_spec(package) is None
    ]
    if missing:
        problems.append(
            (
                "scan.sampler.name",
                f"sampler {runcard.scan.sampler.name!r} needs {', '.join(missing)}: "
                f"pip install {' '.join(missing)}",
            )
        )
    if problems:
        raise RuncardError(problems, source=source)


_FRACTION_KEY = "scan.space.parameters.data.training_fraction"


def _lowest(searched: Range | Choices) -> float:
    return min(searched.choices) if isinstance(searched, Choices) else searched.low


def _validation_points(runcard: ScanRuncard) -> list[tuple[str, str]]:
    """A validation objective needs validation points in every trial: a training fraction
    below 1, in the base runcard or throughout its searched range."""
    if runcard.fit.data.training_fraction >= 1:
        return [
            (
                "scan.objective.chi2",
                "validation chi2 needs validation points: set data.training_fraction below 1",
            )
        ]
    searched = runcard.scan.space.parameters.get("data.training_fraction")
    if searched is None:
        return []
    largest = max(searched.choices) if isinstance(searched, Choices) else searched.high
    if largest < 1:
        return []
    return [
        (
            _FRACTION_KEY,
            "reaches 1, where the validation chi2 of the objective (scan.objective.chi2) has no "
            "points: keep it below 1",
        )
    ]


def check_new_study(runcard: ScanRuncard, source: str = "<runcard>") -> None:
    """Checks for a new study only: a study stored with such a runcard still opens, resumes
    (`scan`) and takes a new budget; RuncardError otherwise."""
    if "replicas" in runcard.fit.model_fields_set:  # even `replicas: 1`, which it would not be
        raise RuncardError(
            [
                (
                    "replicas",
                    f"a scan fits 'scan.replicas' replicas per trial ({runcard.scan.replicas} "
                    "here), whatever this says: give the number there (the top-level "
                    "'replicas' is a fit runcard's)",
                )
            ],
            source=source,
        )


def _with_trial_replicas(runcard: ScanRuncard) -> FitRuncard:
    """The fit part with the replicas of a trial, whose splits the data are checked for; the
    folds are checked by :func:`check_runcard`, under their ``scan.folds`` keys."""
    return runcard.fit.model_copy(update={"replicas": runcard.scan.replicas})


def checked_data(runcard: ScanRuncard, source: str = "<runcard>") -> Problem:
    """The study's data, with every check that needs them passed (RuncardError otherwise):
    a command calls it before it opens, and so creates, a storage."""
    problem = load_problem(_with_trial_replicas(runcard), source)
    check_runcard(runcard, problem, source)
    return problem


@quiet_optuna()
def create_study(
    runcard: ScanRuncard,
    storage: BaseStorage,
    name: str,
    source: str = "<runcard>",
    problem: Problem | None = None,
) -> tuple[optuna.Study, Creation]:
    """Create the study once; the same runcard again is a no-op, one that differs only in its
    budget (scan.trials) changes the study's budget, any other is refused.

    A budget can change because it counts trials and changes none: a scan that ended wants
    more trials of the same kind. Running workers read it again after each trial.

    Returns the study and what was done. Everything is checked before the first write, so a
    refused runcard leaves the storage as it was. ``problem``: the runcard's data from
    :func:`checked_data`, if the caller has them already.
    """
    problem = problem if problem is not None else checked_data(runcard, source)
    text = dump_runcard(runcard)
    url = storage_url(storage)
    raced = False
    if name not in study_names(storage):
        check_new_study(runcard, source)
        try:
            study = optuna.create_study(
                storage=storage, study_name=name, directions=runcard.scan.objective.directions
            )
        except optuna.exceptions.DuplicatedStudyError:
            raced = True  # another process created it a moment ago: compare below
        except Exception as error:  # e.g. a database user that may read but not write
            raise describe_error(error, url) from error
        else:
            try:
                with errors_described(url):
                    study.set_user_attr(RUNCARD_ATTR, text)
                    study.set_user_attr(FINGERPRINT_ATTR, problem.fingerprint())
                    study.set_user_attr(VERSION_ATTR, __version__)
                    study.set_user_attr(ENGINE_ATTR, ENGINE)
            except BaseException:
                # Left without its runcard (a failed write, Ctrl-C), the study would hold the
                # name for good: no command opens it, and creating it again is refused.
                with suppress(Exception):
                    optuna.delete_study(study_name=name, storage=storage)
                raise
            return study, Creation(created=True)
    study = load_study(storage, name)
    with errors_described(url):
        stored = _stored_runcard(study.user_attrs.get(RUNCARD_ATTR))
    if stored == runcard:
        return study, Creation(created=False)
    if stored is not None and _with_budget(stored, runcard.scan.trials) == runcard:
        with errors_described(url):
            study.set_user_attr(RUNCARD_ATTR, text)
        return study, Creation(created=False, old_budget=stored.scan.trials)
    if stored is None and raced:  # the other process has not written the runcard yet
        raise ScanError(
            f"study {name!r} in {url} is being created by another process at this moment; "
            "run the command again to compare its runcard with this one"
        )
    raise ScanError(
        f"study {name!r} in {storage_url(storage)} exists with a different runcard "
        f"({_differences(stored, runcard)}); choose another --name, or use the runcard it "
        "was created with (only scan.trials, the budget, may change)"
    )


def stored_budget(study: optuna.Study) -> int | None:
    """The study's budget as its stored runcard says now: `study create` or `scan` may have
    changed it since a worker started (None if the runcard is missing or not valid)."""
    stored = _stored_runcard(study.user_attrs.get(RUNCARD_ATTR))
    return None if stored is None else stored.scan.trials


def _with_budget(runcard: ScanRuncard, trials: int) -> ScanRuncard:
    return runcard.model_copy(update={"scan": runcard.scan.model_copy(update={"trials": trials})})


def _stored_runcard(text: str | None) -> ScanRuncard | None:
    """A study's runcard as settings, not text: a key added by a later version (with its
    default) changes the dump of a study's runcard, not the study."""
    if text is None:
        return None
    try:
        return parse_scan_runcard(text)
    except RuncardError:
        return None


def _differences(stored: ScanRuncard | None, runcard: ScanRuncard, shown: int = 5) -> str:
    """``key: stored → given`` for the settings that differ, so a user sees what changed."""
    if stored is None:
        return "its stored runcard is missing or not valid for this hyperscan version"
    old, new = _flat(stored.model_dump(mode="json")), _flat(runcard.model_dump(mode="json"))
    keys = [key for key in {**old, **new} if old.get(key) != new.get(key)]
    listed = [f"{key}: {old.get(key)} → {new.get(key)}" for key in keys[:shown]]
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return "; ".join(listed) + more


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix: data}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        flat.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def open_study(storage: BaseStorage, name: str) -> StudySetup:
    """Load a study with its runcard (status, export and workers start here)."""
    study = load_study(storage, name)
    url = storage_url(storage)
    with errors_described(url):
        attrs = study.user_attrs
    text = attrs.get(RUNCARD_ATTR)
    if text is None:
        raise ScanError(
            f"study {name!r} in {url} was not created by `hyperscan study create` (it has no "
            "runcard)"
        )
    try:
        runcard = parse_scan_runcard(text, source=f"runcard of study {name!r}")
    except RuncardError as error:
        raise ScanError(
            f"the runcard stored on study {name!r} is not valid for hyperscan {__version__} "
            f"(created by {attrs.get(VERSION_ATTR, 'an unknown version')}):\n{error}"
        ) from None
    return StudySetup(study, runcard, url)


def study_problem(setup: StudySetup) -> Problem:
    """The study's data as built here, refused if they differ from those it was created with.

    Only workers need them: a worker with another hyperscan version or other data must not
    add trials that cannot be compared with the rest.
    """
    engine = setup.study.user_attrs.get(ENGINE_ATTR, 1)
    if engine != ENGINE:
        raise ScanError(
            f"study {setup.study.study_name!r} holds trials of hyperscan's fit engine revision "
            f"{engine} (hyperscan {setup.study.user_attrs.get(VERSION_ATTR, 'unknown')}), "
            f"this worker's is {ENGINE}: their values would not compare; create a new study "
            "(status, export and report still read this one)"
        )
    problem = load_problem(_with_trial_replicas(setup.runcard))
    expected = setup.study.user_attrs.get(FINGERPRINT_ATTR)
    here = problem.fingerprint()  # hashes every array of the data: once
    if here != expected:
        raise ScanError(
            f"the data this worker builds differ from those study {setup.study.study_name!r} "
            f"was created with (fingerprint {here[:12]} here, "
            f"{str(expected)[:12]} in the study); run workers with the hyperscan version and "
            "data of the study"
        )
    return problem


def minimizes(study: optuna.Study) -> bool:
    """Whether a single-objective study's lower values are better."""
    return study.direction == optuna.study.StudyDirection.MINIMIZE


def ranked(trials: Iterable[FrozenTrial], minimize: bool) -> list[FrozenTrial]:
    """Complete single-objective trials, best first (a tie to the lower number)."""
    sign = 1 if minimize else -1
    return sorted(trials, key=lambda t: (sign * t.value, t.number))
