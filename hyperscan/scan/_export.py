"""A trial, the best eligible one by default, as a fit runcard that `hyperscan fit`
reproduces."""

from __future__ import annotations

import datetime
import errno
import os
import random
import tempfile
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from hyperscan._files import umask
from hyperscan._version import __version__
from hyperscan.runcard import (
    MEMBER_KEYS,
    BatchLayout,
    NotInSpace,
    RuncardError,
    ScanRuncard,
    dump_runcard,
    read_value,
    runcard_from_dict,
    with_settings,
)
from hyperscan.scan._noise_floor import NoiseFloor
from hyperscan.scan._rule import RuleError, parse_rule
from hyperscan.scan._status import pareto_front, state_counts
from hyperscan.scan._study import ScanError, StudySetup, minimizes, ranked
from hyperscan.scan._trial_attrs import last_report, trashed
from hyperscan.score import objective_label


def best_trial(setup: StudySetup) -> optuna.trial.FrozenTrial:
    """The best COMPLETE trial: trashed trials are PRUNED, so they are never eligible."""
    study = setup.study
    objective = setup.runcard.scan.objective
    if objective.multi:
        raise RuleError(
            f"study {study.study_name!r} has {len(objective.names)} objectives "
            f"({', '.join(objective.names)}), so no single best trial: choose one from its "
            f'Pareto front with --rule (e.g. --rule "min {objective.names[0]}, then '
            f'min {objective.names[1]}"), or give --trial N'
        )
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        counts = state_counts(study.get_trials(deepcopy=False))  # trashed apart from pruned
        listed = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
        pruned = study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))
        other = "; `hyperscan export --trial N` writes a pruned or trashed one" if pruned else ""
        raise ScanError(
            f"study {study.study_name!r} has no complete trial yet ({listed or 'no trials'})"
            + other
        )
    return study.best_trial


def chosen_trial(setup: StudySetup, number: int) -> optuna.trial.FrozenTrial:
    """Trial ``number``, if it drew all its values: a complete one, or a pruned or trashed one
    (to refit what the pruner stopped, or to watch a replica diverge)."""
    trials = setup.study.get_trials(deepcopy=False)
    found = next((trial for trial in trials if trial.number == number), None)
    if found is None:
        held = f"trials 0 to {len(trials) - 1}" if trials else "no trials"
        raise ScanError(f"study {setup.study.study_name!r} has no trial {number} ({held})")
    if found.state not in (TrialState.COMPLETE, TrialState.PRUNED):
        state = "failed" if found.state == TrialState.FAIL else f"is {found.state.name.lower()}"
        raise ScanError(
            f"trial {number} of study {setup.study.study_name!r} {state}: "
            "only a complete, pruned or trashed trial has a runcard to export"
        )
    return found


def ruled_trial(setup: StudySetup, rule: str) -> tuple[optuna.trial.FrozenTrial, str]:
    """The trial of the Pareto front that ``rule`` chooses (:mod:`hyperscan.scan._rule`), and
    the rule as applied, in words."""
    objective = setup.runcard.scan.objective
    if not objective.multi:
        raise RuleError(
            f"--rule chooses from the Pareto front of a multi-objective study; study "
            f"{setup.study.study_name!r} has one objective: leave --rule out to export its best "
            "trial, or give --trial N"
        )
    parsed = parse_rule(rule, objective.names)  # before the storage is read
    _, front = pareto_front(setup)
    if not front:
        raise ScanError(f"study {setup.study.study_name!r} has no complete trial yet")
    number = parsed.choose([(trial.number, trial.values) for trial in front])
    chosen = chosen_trial(setup, number)
    return chosen, f"{parsed}: trial {number} of the {len(front)} on the Pareto front"


def values_text(values: Sequence[float], names: tuple[str, ...]) -> str:
    """A value, or values by objective name (a complete trial's, a confirmed refit's)."""
    if len(values) == 1:
        return f"value {values[0]:.6g}"
    return "values " + ", ".join(
        f"{name} {value:.6g}" for name, value in zip(names, values, strict=True)
    )


def outcome(trial: optuna.trial.FrozenTrial, names: tuple[str, ...] = ("value",)) -> str:
    """A trial's value (values, by objective name), or why it has none, in a few words."""
    if trial.state == TrialState.COMPLETE:
        return values_text(trial.values, names)
    reason = trashed(trial)
    if reason:
        return f"trashed: {reason}"
    last = last_report(trial)
    return "pruned" if last is None else f"pruned after step {last[0]}, value then {last[1]:.6g}"


def export_text(
    runcard: ScanRuncard, params: Mapping[str, Any], provenance: Mapping[str, Any]
) -> str:
    """The fit runcard of a trial as YAML, headed by ``key: value`` comments of provenance.

    The file loads as an ordinary fit runcard and records every setting, so ``hyperscan fit``
    reproduces the trial's hyperparameters even if defaults change later.
    """
    lines = ["Fit runcard exported by hyperscan from a scan trial."]
    lines += [f"{key}: {' '.join(str(value).split())}" for key, value in provenance.items()]
    return dump_runcard(runcard.trial_runcard(params), header="\n".join(lines))


def export_trial(
    setup: StudySetup, number: int | None = None, rule: str | None = None
) -> tuple[optuna.trial.FrozenTrial, str]:
    """The best trial, trial ``number``, or the one ``rule`` chooses from a multi-objective
    study's Pareto front, and its fit runcard's text."""
    if number is not None and rule is not None:
        raise RuleError("give --trial or --rule, not both")
    chose = None
    if rule is not None:
        trial, chose = ruled_trial(setup, rule)
    else:
        trial = best_trial(setup) if number is None else chosen_trial(setup, number)
    objective, replicas = setup.runcard.scan.objective, setup.runcard.scan.replicas
    provenance: dict[str, Any] = {
        "study": setup.study.study_name,
        "storage": setup.url,
        "trial": trial.number,
    }
    if objective.multi:
        folds = len(setup.runcard.scan.folds)
        provenance["values"] = outcome(trial, objective.names).removeprefix("values ")
        for entry in objective.entries:
            provenance[f"objective {entry.name}"] = (
                f"{entry.direction} {objective_label(entry, folds)}"
            )
        provenance["rule"] = chose or "none (chosen by --trial)"
    else:
        provenance["value"] = trial.value if trial.state == TrialState.COMPLETE else outcome(trial)
        provenance["objective"] = (
            f"{objective.statistic} of {objective.chi2} chi2 per point over "
            f"{replicas} {'replica' if replicas == 1 else 'replicas'}"
            + (f", {objective.fold_statistic} over folds" if setup.runcard.scan.folds else "")
            if objective.loss == "statistic"
            else objective_label(objective, len(setup.runcard.scan.folds))
        )
    noise = NoiseFloor.stored(setup.study.user_attrs)
    if noise is not None and not objective.multi:
        provenance["noise floor"] = noise.text()
        ties = noise.ties(setup.study.get_trials(deepcopy=False), minimizes(setup.study))
        if len(ties) > 1:
            provenance["tied with the best"] = (
                f"trials {', '.join(map(str, ties))}, within the replicas' spread: "
                f"`hyperscan export --confirm {len(ties)}` chooses among them"
            )
    provenance |= {
        "exported": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "hyperscan": __version__,
    }
    if setup.runcard.scan.folds:
        provenance["folds"] = (
            "the trial's k-fold ensemble, to reproduce its value; without 'folds' the same "
            "settings fit every dataset"
        )
    # The worker's thread count and the batch it fitted the trial in (if it had slots) are
    # part of what makes the fit repeat the trial bit for bit (TrainingSection).
    done = trial.user_attrs.get("fit", {})
    layout = done.get("batch_layout")
    training = {
        "threads": done.get("threads"),
        "batch_layout": None if layout is None else BatchLayout.model_validate(layout),
    }
    fit = setup.runcard.fit
    runcard = setup.runcard.model_copy(
        update={
            "fit": fit.model_copy(update={"training": fit.training.model_copy(update=training)})
        }
    )
    try:
        return trial, export_text(runcard, trial.params, provenance)
    except RuncardError as error:  # trashed because its values break a rule together
        raise ScanError(f"trial {trial.number} has no valid fit runcard: {error}") from None
    except NotInSpace as error:  # ended outside a worker (by hand, the dashboard) undrawn
        raise ScanError(
            f"trial {trial.number} of study {setup.study.study_name!r} has no fit runcard: "
            f"{error} (it was ended without a worker drawing its values)"
        ) from None


#: The seed of the draw when none is given: the same command writes the same runcard.
DEFAULT_SAMPLE_SEED = 0


def parse_override(text: str) -> tuple[str, Any]:
    """``--override PATH=VALUE``: the dotted path and the value, read as a runcard reads it."""
    path, equals, value = text.partition("=")
    if not equals or not path.strip() or any(not part for part in path.strip().split(".")):
        raise ScanError(
            f"--override {text!r}: expected a dotted key path, '=' and a value, "
            "e.g. epochs=20000 or optimizer.learning_rate=1e-3"
        )
    path = path.strip()
    try:
        return path, read_value(value, f"--override {path}")
    except RuncardError as error:
        raise ScanError(str(error)) from None


def _overridden(
    data: dict[str, Any], overrides: Sequence[tuple[str, Any]], entry: bool = False
) -> dict[str, Any]:
    """``data`` (fit-runcard data, or a methodology ``entry``) with the overrides applied; an
    entry takes only those of the keys it sets (the base's apply to the rest)."""
    for path, value in overrides:
        *sections, _ = path.split(".")
        if entry and path.split(".")[0] not in data:
            continue
        node: Any = data
        for depth, section in enumerate(sections):
            node = node.get(section) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                where = ".".join(sections[: depth + 1])
                raise ScanError(
                    f"--override {path}: {where!r} is not a section of a fit runcard, so it "
                    "has no key below it"
                )
        data = with_settings(data, {path: value})
    return data


def _refused(path: str) -> str | None:
    if path.split(".")[0] == "methodologies":
        return "the methodologies are what --sample draws; override their keys instead"
    return None


def _methodology(base: dict[str, Any], trial: dict[str, Any]) -> dict[str, Any]:
    """The per-member sections in which a trial's fit runcard differs from the base's."""
    return {key: trial[key] for key in MEMBER_KEYS if trial[key] != base[key]}


def _ranked(setup: StudySetup, sample: int, thermalization: int) -> tuple[list, list, int]:
    """The eligible trials (complete, not trashed, number >= ``thermalization``), the
    ``sample`` best of them, best first, and the sign that makes lower values better."""
    study = setup.study
    name = study.study_name
    if len(study.directions) > 1:
        raise ScanError(
            f"study {name!r} has {len(study.directions)} objectives, so its trials have no "
            "single ranking: --sample takes the best by one value; export trials of its "
            "Pareto front one by one with --trial N"
        )
    trials = study.get_trials(deepcopy=False)
    if thermalization >= len(trials):
        held = f"trials 0 to {len(trials) - 1}" if trials else "no trials"
        raise ScanError(
            f"--thermalization {thermalization} leaves no trial: study {name!r} has {held}"
        )
    eligible = [
        t
        for t in trials
        if t.state == TrialState.COMPLETE and not trashed(t) and t.number >= thermalization
    ]
    if sample > len(eligible):
        raise ScanError(
            f"--sample {sample} is more than the {len(eligible)} eligible trials of study "
            f"{name!r} (complete, not trashed, numbered {thermalization} or above)"
        )
    sign = 1 if minimizes(study) else -1
    best = ranked(eligible, minimizes(study))[:sample]
    return eligible, best, sign


def _numbers(trials: Sequence[optuna.trial.FrozenTrial]) -> str:
    return ", ".join(str(t.number) for t in trials) or "none"


def export_sample(
    setup: StudySetup,
    sample: int,
    thermalization: int = 0,
    overrides: Sequence[tuple[str, Any]] = (),
    seed: int = DEFAULT_SAMPLE_SEED,
) -> tuple[list[int], str]:
    """The trial each replica takes, and the text of a fit runcard whose replicas each draw
    a methodology, uniformly and reproducibly from ``seed``, among the ``sample`` best
    eligible trials (n3fit's ``trial_specs``).

    The base is the study's fit part fitting a trial's replicas (no folds: the ensemble fits
    all data) with ``overrides``
    applied; each replica's entry holds the sections its trial changes, overridden alike.
    """
    for path, _ in overrides:
        reason = _refused(path)
        if reason is not None:
            raise ScanError(f"--override {path}: {reason}")
    eligible, best, sign = _ranked(setup, sample, thermalization)
    scan = setup.runcard
    fit = scan.fit.model_dump(mode="json", exclude={"methodologies"})
    fit["replicas"] = list(scan.scan.replica_ids)  # a trial's replicas
    base = _overridden(fit, overrides)
    try:
        replicas = runcard_from_dict(base, "--override").replica_ids
    except RuncardError as error:
        raise ScanError(str(error)) from None
    methodologies: dict[int, dict[str, Any]] = {}
    for trial in best:
        try:
            drawn = scan.scan.space.apply(scan.fit, trial.params).model_dump(mode="json")
        except (RuncardError, NotInSpace) as error:
            raise ScanError(f"trial {trial.number} has no valid fit runcard: {error}") from None
        entry = _overridden(_methodology(fit, drawn), overrides, entry=True)
        methodologies[trial.number] = {"trial": trial.number, **entry}
    rng = random.Random(seed)
    taken = [best[rng.randrange(len(best))].number for _ in replicas]
    source = f"the sampled runcard of study {setup.study.study_name!r}"
    try:
        runcard = runcard_from_dict(
            {**base, "methodologies": [methodologies[n] for n in taken]}, source
        )
    except RuncardError as error:
        raise ScanError(str(error)) from None
    shown = [f"{path}={' '.join(str(value).split())}" for path, value in overrides]
    lines = [
        "Fit runcard exported by hyperscan: an ensemble whose replicas draw their methodology",
        "from the best trials of a scan (methodologies[k] is replica k's, with its trial).",
        f"study: {setup.study.study_name}",
        f"storage: {setup.url}",
        f"rule: each replica draws uniformly, with seed {seed}, one of the {sample} best "
        f"({'lowest' if sign > 0 else 'highest'} value) of the eligible trials: complete, "
        f"not trashed, numbered {thermalization} or above",
        f"eligible: {_numbers(sorted(eligible, key=lambda t: t.number))}",
        "sampled: " + ", ".join(f"{t.number} (value {t.value:.6g})" for t in best),
        f"seed: {seed}",
        f"overrides: {' '.join(shown) or 'none'}",
        f"exported: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"hyperscan: {__version__}",
    ]
    wrapped = [part for line in lines for part in textwrap.wrap(line, 96, subsequent_indent="  ")]
    return taken, dump_runcard(runcard, header="\n".join(wrapped))


# os.link's refusals on a file system without hard links (FAT, some network and FUSE
# file systems), where a new output is renamed into place as it was before.
_NO_HARD_LINKS = {errno.EPERM, errno.EACCES, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV}


def write_atomically(path: Path, text: str, force: bool = False) -> None:
    """The file appears complete or not at all; an existing one is kept unless `force`,
    even one that another process writes meanwhile."""
    path = Path(path)
    exists = ScanError(f"{path} exists; use --force to replace it")
    if path.exists() and not force:
        raise exists
    if not path.parent.is_dir():  # a typo, most likely: not a folder to create unasked
        raise ScanError(f"cannot write {path}: the folder {path.parent} does not exist")
    try:
        handle, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as error:
        raise ScanError(f"cannot write {path}: {error.strerror or error}") from None
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.chmod(staging, 0o666 & ~umask())
        if force:
            os.replace(staging, path)
        else:
            _publish_new(staging, path, exists)
    except BaseException as error:
        Path(staging).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise ScanError(f"cannot write {path}: {error.strerror or error}") from None
        raise


def _publish_new(staging: str, path: Path, exists: ScanError) -> None:
    """Give the staged file its name unless the name is taken, in one step: a file created
    after the check before staging is kept, where a rename would replace it."""
    try:
        os.link(staging, path)
    except FileExistsError:
        raise exists from None
    except OSError as error:
        if error.errno not in _NO_HARD_LINKS:
            raise
        os.replace(staging, path)  # no hard links here: the check before staging guards
    else:
        os.unlink(staging)
