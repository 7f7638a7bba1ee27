# SPDX-License-Identifier: GPL-3.0-or-later
"""Runcards both ways with n3fit 4.1.5: a hyperscan fit (or scan) runcard as an n3fit runcard,
and an n3fit runcard (a fit, or a hyperopt scan) as a hyperscan one.

Pure mappings, data to data: no file is read or written here and nothing but the runcard
package is imported, so the commands (``hyperscan export --format n3fit``,
``hyperscan import-n3fit``) and the tests share them. Every key is mapped, or refused by name
with the reason, all at once (:class:`N3fitError`); a key that carries no meaning for the fit
(an output option, a description) is ignored and said so in the card's notes. The decisions,
key by key, are in docs/n3fit.md.

The mapping follows n3fit 4.1.5's runcard keys and behaviour, defaults included: a key an
n3fit runcard leaves out takes n3fit's default here, not hyperscan's. No n3fit code is used.
"""

from __future__ import annotations

import math
import re
import shlex
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, get_args

import yaml

from ._architecture import FLAVOURS, Activation
from ._base import _number
from ._distributions import Choices, Range
from ._fit import FitRuncard
from ._load import RuncardError, _Dumper, _parse_yaml, _validate
from ._scan import ScanRuncard
from .real_datasets import REAL_DATASETS

__all__ = [
    "N3FIT_VERSION",
    "SHIPPED_THEORY_ID",
    "TOY_PDF_SET",
    "ImportedCard",
    "N3fitCard",
    "N3fitError",
    "fit_to_n3fit",
    "n3fit_to_hyperscan",
    "read_n3fit_card",
    "scan_to_n3fit",
    "trial_to_n3fit",
]

N3FIT_VERSION = "4.1.5"
#: The theory of hyperscan's shipped DIS data (hyperscan/data/dis/NOTICE.md).
SHIPPED_THEORY_ID = 99000001
#: hyperscan's toy PDF as an LHAPDF set (the n3fit peer kit's setup.sh writes it): the t0 PDF
#: of hyperscan's t0 covariance, and the truth of its closure tests on real data.
TOY_PDF_SET = "HyperscanToyLH"

#: hyperscan's fitted flavours and n3fit's names for them in the EVOL basis.
_FLAVOURS = {"Sigma": "sng", "g": "g", "V": "v", "V3": "v3", "V8": "v8"}
_FLAVOURS |= {"T3": "t3", "T8": "t8", "T15": "t15"}
_OPTIMIZERS = {"adam": "Adam", "nadam": "Nadam", "amsgrad": "Amsgrad"}
_OPTIMIZERS |= {"rmsprop": "RMSprop", "adadelta": "Adadelta", "sgd": "SGD"}
#: n3fit 4.1.5's learning rate of each optimiser when a runcard gives none.
_N3FIT_LEARNING_RATE = {"RMSprop": 0.01, "Adam": 0.01, "Adadelta": 1.0, "Nadam": 0.001}
_N3FIT_LEARNING_RATE |= {"Amsgrad": 0.01, "SGD": 0.01}
#: n3fit 4.1.5 clips every optimiser's gradients, at this norm when a runcard gives none.
_N3FIT_CLIPNORM = 1.0
#: The initialisers both codes have (n3fit's third, random_uniform, hyperscan has not).
_INITIALIZERS = ("glorot_normal", "glorot_uniform")
_ACTIVATIONS: tuple[str, ...] = get_args(Activation)
#: n3fit 4.1.5's defaults of keys a runcard may leave out.
_N3FIT_CHI2_THRESHOLD = 10.0
_N3FIT_POSITIVITY_THRESHOLD = 1.0e-6
_N3FIT_FOLD_THRESHOLD = 50.0
_N3FIT_REDUCE_PROPORTION = 0.85
#: n3fit's hyperopt draws the patience on this many steps between its min and max.
_PATIENCE_STEPS = 5
#: n3fit's statistics across folds, by hyperscan's name for each (median: none).
_FOLD_STATISTICS = {"mean": "average", "average": "average", "average_best": "average_best"}
_FOLD_STATISTICS |= {"max": "best_worst", "best_worst": "best_worst", "std": "std"}
_OUTPUT_SIZE = len(FLAVOURS)

#: Keys of an n3fit runcard that hyperscan cannot map, and why (by key path, list indices
#: left out); any other unknown key is refused as unknown.
_NO_EQUIVALENT = {
    "load": "starting weights read from a file: hyperscan starts every replica from its seed",
    "load_weights_from_fit": "starting weights of another fit: hyperscan starts every replica "
    "from its seed",
    "fiatlux": "a photon PDF (QED fit): hyperscan fits the 8 flavours of the EVOL basis",
    "theorycovmatconfig": "a theory covariance: hyperscan fits with the experimental (t0) one",
    "positivity_bound": "a polarised fit's bound: hyperscan fits unpolarised PDFs",
    "trial_specs": "methodologies read from an n3fit hyperopt run's tries.json: hyperscan's "
    "ensembles of trials come from its own studies (export --sample)",
    "parameters.feature_scaling_points": "feature scaling of x: hyperscan's network takes "
    "(x, ln x)",
    "parameters.interpolation_points": "feature scaling of x: hyperscan's network takes (x, ln x)",
    "parameters.regularizer": "hyperscan's network has no weight regulariser",
    "parameters.regularizer_args": "hyperscan's network has no weight regulariser",
    "hyperscan_config.parameters": "whole parameter sets to choose from: hyperscan draws each "
    "setting on its own (scan.space)",
    "dataset_inputs.sys": "the legacy systematics number: give the commondata variant",
}
#: Keys that carry no meaning for the fit: mapped to nothing, and said so in the card's notes.
_IGNORED = {
    "fitting.savepseudodata": "an n3fit output option: it writes each replica's pseudodata",
    "parallel_models": "how n3fit trains its replicas, together or one by one; hyperscan "
    "always trains them together, with the same result per replica",
    "save": "an n3fit output option: it writes the weights",
    "tensorboard": "an n3fit output option: TensorBoard logs",
    "kfold.target": "n3fit 4.1.5 reads no 'target': its fold statistic is 'fold_statistic'",
}
#: Keys hyperscan takes only at the value it always uses (n3fit's default), and what it is.
_ONLY = {
    "same_trvl_per_replica": (False, "each replica has its own training/validation split"),
    "resample_negative_pseudodata": (False, "negative pseudodata are kept, not redrawn"),
    "separate_multiplicative": (False, "pseudodata are drawn with the t0 covariance as a whole"),
    "use_t0_sampling": (True, "pseudodata are drawn from the t0 covariance"),
    "parameters.layer_type": ("dense", "its layers are dense"),
    "parameters.dropout": (0, "its network has no dropout"),
    "parameters.stopping_delta": (0, "any improvement of the validation chi2 counts"),
    "fitting.fitbasis": ("EVOL", "it fits the 8 flavours of the EVOL basis"),
    "closuretest.errorsize": (1, "it does not rescale the data's uncertainties"),
}


class N3fitError(ValueError):
    """What cannot cross between hyperscan and n3fit 4.1.5: every key at once, each with why,
    said in one line."""

    def __init__(self, what: str, problems: Sequence[tuple[str, str]]) -> None:
        self.what = what
        self.problems = list(dict.fromkeys(problems))  # one problem found twice: said once
        super().__init__(what, self.problems)

    def __str__(self) -> str:
        keys: dict[str, list[str]] = {}  # keys refused for the same reason, said together
        for key, why in self.problems:
            keys.setdefault(why, []).append(key)
        return f"{self.what}: " + "; ".join(f"{', '.join(k)} ({why})" for why, k in keys.items())


class _FlowDict(dict):
    """A mapping written on one line, as n3fit runcards write their dataset and basis entries."""


class _N3fitDumper(_Dumper):
    """hyperscan's dumper (YAML 1.2 numbers, lists of scalars on one line) with flow entries."""


_N3fitDumper.add_representer(
    _FlowDict,
    lambda dumper, data: dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True),
)


def _yaml(data: Mapping[str, Any]) -> str:
    return yaml.dump(
        data,
        Dumper=_N3fitDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )


def _comments(lines: Sequence[str]) -> str:
    """Comment lines, wrapped at spaces to fit 98 columns (a long line goes on indented)."""
    wrapped = [
        part
        for text in lines
        for line in text.splitlines()
        for part in (
            textwrap.wrap(
                line, 96, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
            )
            or [""]
        )
    ]
    return "".join(f"# {line}".rstrip() + "\n" for line in wrapped)


# --------------------------------------------------------------------------------------------
# hyperscan -> n3fit


@dataclass(frozen=True)
class N3fitCard:
    """An n3fit 4.1.5 runcard (``card``, as n3fit reads it), the replicas and hyperopt trials
    its command line gives (n3fit takes them there, not in the runcard), and what of the
    hyperscan runcard it leaves out (``notes``: settings of how hyperscan runs, not of what
    it fits)."""

    card: dict[str, Any]
    replicas: tuple[int, ...]
    hyperopt: int | None = None
    notes: tuple[str, ...] = ()

    @property
    def args(self) -> str | None:
        """n3fit's arguments after the runcard (``1 -r 8``, ``1 --hyperopt 4``); None when the
        replicas are no range, which one n3fit command cannot fit."""
        ids = self.replicas
        if ids != tuple(range(ids[0], ids[0] + len(ids))):
            return None
        args = str(ids[0]) + (f" -r {ids[-1]}" if len(ids) > 1 else "")
        return args + (f" --hyperopt {self.hyperopt}" if self.hyperopt is not None else "")

    def text(self, header: Sequence[str] = ()) -> str:
        """The runcard as YAML, headed by ``header`` and the notes as comments, and by the
        ``# n3fit-args:`` line that the n3fit peer kit's run.sh reads."""
        lines = [*header, *self.notes]
        if self.args is None:
            shown = ", ".join(map(str, self.replicas))
            lines.append(
                f"replicas {shown}: one n3fit command fits a range (REPLICA -r LAST); run "
                "`n3fit RUNCARD N` for each"
            )
        else:
            lines.append(f"n3fit-args: {self.args}")
        return _comments(lines) + _yaml(self.card)


def _theory_id(theory: str | None, given: int | None) -> int | None:
    if theory is None:
        return SHIPPED_THEORY_ID
    if given is not None:
        return given
    found = re.fullmatch(r"theory_(\d+)", PurePath(theory).name)
    return int(found.group(1)) if found else None


def fit_to_n3fit(
    runcard: FitRuncard,
    theory_id: int | None = None,
    description: str = "written by hyperscan",
) -> N3fitCard:
    """``runcard`` as an n3fit 4.1.5 runcard of the same fit: the same data, cuts, covariance,
    seeds, network, optimiser, stopping, positivity and preprocessing.

    ``theory_id`` is the ID of ``data.real.theory`` when its folder's name does not say it
    (the shipped data are theory 99000001). What n3fit cannot express is refused
    (:class:`N3fitError`, every key at once); settings of how hyperscan runs its training
    loop are left out and named in the notes.
    """
    problems: list[tuple[str, str]] = []
    notes: list[str] = []
    if runcard.methodologies:
        problems.append(
            (
                "methodologies",
                "per-replica methodologies: n3fit 4.1.5 takes them only through trial_specs, "
                "from the tries.json of its own hyperopt run",
            )
        )
    if runcard.folds:
        problems.append(
            (
                "folds",
                "n3fit 4.1.5 holds datasets out only in a hyperopt run (kfold, --hyperopt)",
            )
        )
    data = runcard.data
    card: dict[str, Any] = {"description": description}
    real = data.real
    if real is None:
        problems.append(
            (
                "data.closure",
                "hyperscan's built-in closure data have no n3fit equivalent: n3fit fits NNPDF "
                "datasets (data.real; data.real.closure for a closure test on them)",
            )
        )
        positivity_sets: tuple[str, ...] = ()
    else:
        entries = real.datasets
        if data.datasets != "all":
            entries = tuple(e for e in real.datasets if e.dataset in data.datasets)
            missing = sorted(set(data.datasets) - {e.dataset for e in real.datasets})
            if missing:
                problems.append(
                    ("data.datasets", f"{', '.join(missing)}: not among data.real.datasets")
                )
        card["dataset_inputs"] = [
            _FlowDict(
                {"dataset": e.dataset}
                | ({"variant": e.variant} if e.variant is not None else {})
                | {"frac": data.training_fraction}
            )
            for e in entries
        ]
        positivity_sets = real.positivity
    card["genrep"] = data.pseudodata
    threads = runcard.training.threads
    card["debug"] = threads == 1  # n3fit's debug: one thread (and fixed seeds)
    if threads is not None and threads > 1:
        card["maxcores"] = threads
    if runcard.training.precision == "float64":
        card["double_precision"] = True
    if real is not None:
        theory = _theory_id(real.theory, theory_id)
        if theory is None:
            problems.append(
                (
                    "data.real.theory",
                    f"{real.theory}: its theory ID is unknown: name the theory_<ID> folder",
                )
            )
        card["theory"] = {"theoryid": theory}
        if not real.t0:
            problems.append(
                (
                    "data.real.t0",
                    "false: n3fit 4.1.5 always fits with the t0 covariance (it fixes use_t0)",
                )
            )
        card["datacuts"] = {"t0pdfset": TOY_PDF_SET, "q2min": real.q2min, "w2min": real.w2min}
    seeds = runcard.seeds
    card |= {"trvlseed": seeds.split, "nnseed": seeds.network, "mcseed": seeds.data}
    card["parameters"] = _parameters(runcard, problems)
    card["fitting"] = {
        "fitbasis": "EVOL",
        "savepseudodata": False,
        "basis": [
            _FlowDict(
                fl=_FLAVOURS[flavour],
                trainable=False,
                smallx=list(runcard.preprocessing[flavour].alpha),
                largex=list(runcard.preprocessing[flavour].beta),
            )
            for flavour in FLAVOURS
        ],
    }
    # n3fit grows lambda to each set's maxlambda unless a multiplier is given (then unused).
    maxlambda = runcard.positivity.max if runcard.positivity.max is not None else 1.0e6
    card["positivity"] = {
        "posdatasets": [_FlowDict(dataset=name, maxlambda=maxlambda) for name in positivity_sets]
    }
    card["integrability"] = {"integdatasets": []}
    closure = real.closure if real is not None else None
    if closure is not None:
        if closure.fits > 1:
            problems.append(
                (
                    "data.real.closure.fits",
                    f"{closure.fits}: an n3fit fit is one level-1 closure test; fit each "
                    "closuretest.filterseed apart",
                )
            )
        card["closuretest"] = {
            "filterseed": closure.seed,
            "fakedata": True,
            "fakepdf": TOY_PDF_SET,
            "fakenoise": closure.level == 1,
        }
    training = runcard.training
    loop = ", ".join(
        f"training.{key} {_number(getattr(training, key))}"
        for key in ("steps_per_call", "jit", "compact", "max_padding_waste")
    )
    notes.append(f"left out (how hyperscan runs its training loop, not what it fits): {loop}")
    if training.batch_layout is not None:
        notes.append(
            "left out: training.batch_layout (the batch hyperscan fitted the trial in, for "
            "hyperscan to refit it bit for bit)"
        )
    notes.append(
        f"left out: divergence.max_loss {_number(runcard.divergence.max_loss)} (hyperscan "
        "freezes a replica whose loss passes it; n3fit has no such guard)"
    )
    if problems:
        raise N3fitError(f"n3fit {N3FIT_VERSION} cannot express", problems)
    return N3fitCard(card, runcard.replica_ids, notes=tuple(notes))


def _parameters(runcard: FitRuncard, problems: list[tuple[str, str]]) -> dict[str, Any]:
    """n3fit's ``parameters``: network, optimiser, epochs, positivity, stopping."""
    architecture = runcard.architecture
    if architecture.initializer not in _INITIALIZERS:
        problems.append(
            (
                "architecture.initializer",
                f"{architecture.initializer}: n3fit {N3FIT_VERSION} has "
                f"{', '.join(_INITIALIZERS)} (and random_uniform)",
            )
        )
    optimizer = runcard.optimizer
    if optimizer.clipnorm is None:
        problems.append(
            (
                "optimizer.clipnorm",
                f"null (no clipping): n3fit {N3FIT_VERSION} clips every optimiser's gradients, "
                f"at {_number(_N3FIT_CLIPNORM)} when a runcard gives no clipnorm",
            )
        )
    positivity: dict[str, Any] = {"initial": runcard.positivity.initial}
    if runcard.positivity.multiplier is not None:
        positivity["multiplier"] = runcard.positivity.multiplier
    if runcard.stopping.positivity_threshold != _N3FIT_POSITIVITY_THRESHOLD:
        positivity["threshold"] = runcard.stopping.positivity_threshold
    return {
        "nodes_per_layer": [*architecture.nodes, _OUTPUT_SIZE],
        "activation_per_layer": [*architecture.activations, "linear"],
        "initializer": architecture.initializer,
        "optimizer": {
            "optimizer_name": _OPTIMIZERS[optimizer.name],
            "learning_rate": optimizer.learning_rate,
            "clipnorm": optimizer.clipnorm,
        },
        "epochs": runcard.epochs,
        "positivity": positivity,
        "stopping_patience": runcard.stopping.patience,
        "layer_type": "dense",
        "dropout": 0.0,
        "threshold_chi2": runcard.stopping.threshold_chi2,
    }


def scan_to_n3fit(
    scan: ScanRuncard,
    theory_id: int | None = None,
    description: str = "written by hyperscan",
) -> N3fitCard:
    """A scan runcard as an n3fit 4.1.5 hyperopt runcard (``hyperscan_config`` and
    ``kfold``; its command line ``1 -r R --hyperopt T``): the inverse of what
    :func:`n3fit_to_hyperscan` makes of one. The objective must be one of n3fit's losses and
    every searched setting one n3fit's hyperopt draws, in the way it draws it; the sampler,
    pruner and trash rule of the study are left out (n3fit has none to set)."""
    problems: list[tuple[str, str]] = []
    notes: list[str] = []
    section = scan.scan
    base = scan.fit.model_copy(update={"replicas": section.replica_ids})
    try:
        fitted = fit_to_n3fit(base, theory_id, description)
    except N3fitError as error:
        problems += error.problems
        fitted = None
    config = _hyperopt_config(scan, problems)
    kfold = _kfold(section, problems)
    notes.append(
        f"left out: scan.sampler {section.sampler.name} (n3fit's hyperopt draws with TPE), "
        f"scan.pruner {section.pruner.name} (n3fit prunes no trial), scan.divergence "
        "(n3fit trashes no trial for its diverged replicas)"
    )
    if problems or fitted is None:
        raise N3fitError(f"n3fit {N3FIT_VERSION} cannot express", problems)
    card: dict[str, Any] = {}
    for key, value in fitted.card.items():
        card[key] = value
        if key == "debug":  # where n3fit's hyperopt runcards write them
            card["hyperscan_config"] = config
            card["kfold"] = kfold
    return N3fitCard(card, fitted.replicas, section.trials, (*fitted.notes, *notes))


def trial_to_n3fit(text: str, theory_id: int | None = None) -> str:
    """The n3fit 4.1.5 runcard of an exported trial (``hyperscan export``'s fit runcard,
    ``text``), by :func:`fit_to_n3fit`, headed by the trial's provenance comments.

    A k-fold trial's folds are left out, and said so: n3fit holds datasets out only in a
    hyperopt run, so the card fits the trial's settings on every dataset, as n3fit's own
    trial_specs do with a hyperopt trial."""
    source = "the exported trial"
    runcard = _validate(FitRuncard, _parse_yaml(text, source, None), source)
    provenance = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        provenance.append(line[1:].strip())
    fields = dict(line.split(": ", 1) for line in provenance if ": " in line)
    notes = []
    if runcard.folds:
        notes.append(
            f"left out: the trial's {len(runcard.folds)} folds (n3fit holds datasets out only "
            "in a hyperopt run): this card fits the trial's settings on every dataset"
        )
        runcard = runcard.model_copy(update={"folds": ()})
    description = "exported by hyperscan" + "".join(
        f", {key} {fields[key]}" for key in ("study", "trial") if key in fields
    )
    card = fit_to_n3fit(runcard, theory_id, description)
    header = [
        f"n3fit {N3FIT_VERSION} runcard written by `hyperscan export --format n3fit` "
        "(docs/n3fit.md): the trial's fit, for n3fit.",
        "The trial, as hyperscan's export of it says (its runcard there: hyperscan's):",
        *(
            f"  {line}"
            for line in provenance
            if line and not line.startswith("Fit runcard exported")
        ),
        *notes,
    ]
    return card.text(header)


def _hyperopt_config(scan: ScanRuncard, problems: list[tuple[str, str]]) -> dict[str, Any]:
    """n3fit's ``hyperscan_config`` of ``scan.space``."""
    space = scan.scan.space
    base = scan.fit
    config: dict[str, Any] = {}
    where = "scan.space"
    parameters = dict(space.parameters)
    stopping: dict[str, Any] = {}
    epochs = parameters.pop("epochs", None)
    if epochs is not None:
        if isinstance(epochs, Range) and not epochs.log and epochs.step in (None, 1):
            stopping |= {"min_epochs": epochs.low, "max_epochs": epochs.high}
        else:
            problems.append(
                (f"{where}.parameters.epochs", "n3fit draws the epochs uniformly in a range")
            )
    patience = parameters.pop("stopping.patience", None)
    if patience is not None:
        steps = (
            None
            if not isinstance(patience, Range) or patience.step is None
            else (patience.high - patience.low) / patience.step
        )
        equal = steps is None or math.isclose(steps, _PATIENCE_STEPS)
        if isinstance(patience, Range) and not patience.log and equal:
            stopping |= {"min_patience": patience.low, "max_patience": patience.high}
        else:
            problems.append(
                (
                    f"{where}.parameters.stopping.patience",
                    f"n3fit draws the patience on {_PATIENCE_STEPS} equal steps of a range",
                )
            )
    if stopping:
        config["stopping"] = stopping
    positivity: dict[str, Any] = {}
    multiplier = parameters.pop("positivity.multiplier", None)
    if multiplier is not None:
        if isinstance(multiplier, Range) and not multiplier.log and multiplier.step is None:
            positivity |= {"min_multiplier": multiplier.low, "max_multiplier": multiplier.high}
        else:
            problems.append(
                (
                    f"{where}.parameters.positivity.multiplier",
                    "n3fit draws the multiplier uniformly in a range",
                )
            )
    initial = parameters.pop("positivity.initial", None)
    if initial is not None:
        if isinstance(initial, Range) and initial.log and initial.step is None:
            positivity |= {"min_initial": initial.low, "max_initial": initial.high}
        else:
            problems.append(
                (
                    f"{where}.parameters.positivity.initial",
                    "n3fit draws the initial lambda log-uniformly in a range (log: true)",
                )
            )
    if positivity:
        config["positivity"] = positivity
    if space.optimizer:
        config["optimizer"] = [
            _optimizer_space(name, sub, base, problems) for name, sub in space.optimizer.items()
        ]
    architecture: dict[str, Any] = {}
    initializer = parameters.pop("architecture.initializer", None)
    if initializer is not None:
        choices = initializer.choices if isinstance(initializer, Choices) else ()
        if choices and all(choice in _INITIALIZERS for choice in choices):
            architecture["initializers"] = list(choices)
        else:
            problems.append(
                (
                    f"{where}.parameters.architecture.initializer",
                    f"n3fit chooses among {', '.join(_INITIALIZERS)} (and random_uniform)",
                )
            )
    if space.layers is not None and space.units is not None:
        units = space.units
        if units.log or units.step not in (None, 1):
            problems.append((f"{where}.units", "n3fit draws the units uniformly in a range"))
        step = int(space.layers.step or 1)
        # n3fit counts the output layer among its layers.
        architecture["n_layers"] = list(
            range(int(space.layers.low) + 1, int(space.layers.high) + 2, step)
        )
        architecture |= {"min_units": int(units.low), "max_units": int(units.high)}
    if space.activation is not None:
        architecture["activations"] = list(space.activation)
    if architecture:
        config["architecture"] = architecture
    for path in parameters:
        problems.append(
            (
                f"{where}.parameters.{path}",
                "n3fit's hyperopt searches the epochs, patience, positivity multiplier and "
                "initial lambda, optimisers, initialisers, layers, units and activations only",
            )
        )
    return config


def _optimizer_space(
    name: str, sub: Any, base: FitRuncard, problems: list[tuple[str, str]]
) -> dict[str, Any]:
    """One entry of n3fit's ``hyperscan_config.optimizer``; what the sub-space leaves out
    is the base runcard's, which n3fit writes as a fixed value."""
    entry: dict[str, Any] = {"optimizer_name": _OPTIMIZERS[name]}
    for key in ("learning_rate", "clipnorm"):
        dist = getattr(sub, key)
        where = f"scan.space.optimizer.{name}.{key}"
        if dist is None:
            value = getattr(base.optimizer, key)
            if value is None:
                problems.append((f"optimizer.{key}", f"null: n3fit {N3FIT_VERSION} always clips"))
            entry[key] = value
        elif isinstance(dist, Choices):
            if len(dist.choices) == 1 and dist.choices[0] is not None:
                entry[key] = dist.choices[0]
            else:
                problems.append((where, "n3fit takes a fixed value or a range {min, max}"))
        elif dist.step is not None:
            problems.append((where, "n3fit draws it in a range, with no step"))
        else:
            entry[key] = {"min": dist.low, "max": dist.high} | (
                {"sampling": "log"} if dist.log else {}
            )
    return entry


def _kfold(section: Any, problems: list[tuple[str, str]]) -> dict[str, Any]:
    """n3fit's ``kfold``: the folds and the loss of ``scan``."""
    objective = section.objective
    where = "scan.objective"
    if not section.folds:
        problems.append(("scan.folds", "n3fit's hyperopt needs k-fold partitions"))
    if objective.multi:
        problems.append((f"{where}.objectives", "n3fit's hyperopt minimises one loss"))
    elif objective.loss not in ("chi2", "phi2", "logp", "chi2p"):
        problems.append(
            (
                f"{where}.loss",
                f"{objective.loss}: n3fit's hyperopt losses are chi2, phi2, logp and chi2p",
            )
        )
    if objective.phi_squared:
        problems.append((f"{where}.phi_squared", "n3fit 4.1.5's phi2 loss is phi, not phi²"))
    fold_statistic = _FOLD_STATISTICS.get(objective.fold_statistic)
    if fold_statistic is None:
        problems.append(
            (
                f"{where}.fold_statistic",
                f"{objective.fold_statistic}: n3fit has average, best_worst and std",
            )
        )
    threshold = objective.threshold if objective.threshold is not None else math.inf
    return {
        "loss_type": objective.loss,
        "replica_statistic": objective.replica_statistic,
        "fold_statistic": fold_statistic,
        "reduce_proportion": objective.best_fraction,
        "penalties": list(objective.penalties),
        "penalties_in_loss": objective.penalties_in_loss,
        "threshold": threshold,
        "partitions": [{"datasets": list(fold)} for fold in section.folds],
    }


# --------------------------------------------------------------------------------------------
# n3fit -> hyperscan

_MISSING: Any = object()
KeyPath = tuple[str | int, ...]


def _key(path: KeyPath) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _plain(path: KeyPath) -> str:
    """The key path without list indices (how `_NO_EQUIVALENT` names keys)."""
    return ".".join(part for part in path if isinstance(part, str))


def _shown(value: Any) -> str:
    if isinstance(value, int | float):  # booleans too: _number writes them true, false
        return _number(value)
    if isinstance(value, str):
        return repr(value)
    return " ".join(str(value).split())


class _Reader:
    """An n3fit runcard read key by key: what was read, what is wrong, what was ignored; the
    keys never read are the unknown ones."""

    def __init__(self, card: Mapping[str, Any]) -> None:
        self.card = card
        self.read: set[KeyPath] = set()
        self.opened: set[KeyPath] = {()}
        self.problems: list[tuple[str, str]] = []
        self.notes: list[str] = []

    def at(self, path: KeyPath) -> Any:
        node: Any = self.card
        for part in path:
            if isinstance(part, int):
                if not isinstance(node, list) or part >= len(node):
                    return _MISSING
            elif not isinstance(node, Mapping) or part not in node:
                return _MISSING
            node = node[part]
        return node

    def refuse(self, path: KeyPath | str, why: str) -> None:
        self.problems.append((path if isinstance(path, str) else _key(path), why))

    def take(self, *path: str | int, required: bool = False) -> Any:
        """The value at ``path`` (``_MISSING`` if absent: a problem when ``required``)."""
        self.read.add(path)
        for depth in range(len(path)):
            self.opened.add(path[:depth])
        value = self.at(path)
        if value is _MISSING and required:
            self.refuse(path, f"missing: n3fit {N3FIT_VERSION} needs it")
        return value

    def section(self, *path: str | int, required: bool = False) -> Mapping[str, Any] | None:
        """A mapping whose keys are read one by one (the others are unknown)."""
        value = self.take(*path, required=required)
        self.read.discard(path)
        if value is _MISSING or value is None:
            self.read.add(path)
            return None
        if not isinstance(value, Mapping):
            self.read.add(path)
            self.refuse(path, f"expected a mapping, got {_shown(value)}")
            return None
        self.opened.add(path)
        return value

    def entries(self, *path: str | int, required: bool = False) -> list[Any]:
        """A list whose entries are read one by one."""
        value = self.take(*path, required=required)
        if value is _MISSING or value is None:
            return []
        if not isinstance(value, list):
            self.refuse(path, f"expected a list, got {_shown(value)}")
            return []
        self.read.discard(path)
        self.opened.add(path)
        return value

    def typed(self, kind: str, *path: str | int, required: bool = False, default: Any = _MISSING):
        """The value at ``path`` if it is of ``kind`` (number, integer, boolean, string), else
        ``default`` (with a problem)."""
        value = self.take(*path, required=required)
        if value is _MISSING:
            return default
        ok = {
            "number": isinstance(value, int | float) and not isinstance(value, bool),
            "integer": (isinstance(value, int) and not isinstance(value, bool))
            or (isinstance(value, float) and value.is_integer()),
            "boolean": isinstance(value, bool),
            "string": isinstance(value, str),
        }[kind]
        if not ok:
            article = "an" if kind == "integer" else "a"
            self.refuse(path, f"expected {article} {kind}, got {_shown(value)}")
            return default
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value) if isinstance(value, float) else value
        return value

    def only(self, key: str) -> None:
        """A key hyperscan takes only at the value it always uses."""
        path = tuple(key.split("."))
        value = self.take(*path)
        allowed, what = _ONLY[key]
        if value is _MISSING:
            return
        if value != allowed or isinstance(value, bool) != isinstance(allowed, bool):
            self.refuse(path, f"{_shown(value)}: hyperscan takes only {_shown(allowed)}, as {what}")

    def ignore(self, key: str) -> None:
        path = tuple(key.split("."))
        if self.take(*path) is not _MISSING:
            self.notes.append(f"ignored: {key} ({_IGNORED[key]})")

    def unknown(self) -> Iterator[KeyPath]:
        def walk(node: Any, path: KeyPath) -> Iterator[KeyPath]:
            if path in self.read:
                return
            if path in self.opened and isinstance(node, Mapping):
                for key, value in node.items():
                    yield from walk(value, (*path, key))
            elif path in self.opened and isinstance(node, list):
                for index, value in enumerate(node):
                    yield from walk(value, (*path, index))
            else:
                yield path

        yield from walk(self.card, ())


@dataclass(frozen=True)
class ImportedCard:
    """A hyperscan runcard made from an n3fit one: its data (``runcard_from_dict`` or, with
    ``scan``, ``scan_runcard_from_dict`` validate them), and what the n3fit runcard had that
    hyperscan ignores or takes a default for (``notes``, for the written card's header)."""

    data: dict[str, Any]
    notes: tuple[str, ...] = ()

    @property
    def is_scan(self) -> bool:
        """A scan runcard: the n3fit runcard had ``hyperscan_config`` and ``kfold``."""
        return "scan" in self.data

    def runcard(self, source: str = "<imported runcard>") -> FitRuncard | ScanRuncard:
        """The runcard, validated as hyperscan validates a file (:class:`RuncardError`)."""
        model = ScanRuncard if self.is_scan else FitRuncard
        return _validate(model, self.data, source)

    def text(self, source: str = "<imported runcard>", header: Sequence[str] = ()) -> str:
        """The validated runcard as YAML with every setting written (as ``dump_runcard``
        writes one), headed by ``header`` and the notes as comments. A scan runcard has no
        top-level ``replicas``: a new study refuses one (the trial's are scan.replicas)."""
        data = self.runcard(source).model_dump(mode="json")
        if self.is_scan:
            del data["replicas"]
        return _comments([*header, *self.notes]) + _yaml(data)


def read_n3fit_card(
    text: str, source: str = "<n3fit runcard>"
) -> tuple[dict[str, Any], str | None]:
    """An n3fit runcard's YAML (numbers read as YAML 1.2, as n3fit reads them: ``2e2`` is 200)
    and the arguments of its ``# n3fit-args:`` comment line (the n3fit peer kit's way of giving
    the command line with the card), or None. A :class:`RuncardError` for malformed YAML."""
    data = _parse_yaml(text, source, None)
    if not isinstance(data, dict):
        raise RuncardError([("", "an n3fit runcard is a mapping of keys")], None, source)
    found = re.search(r"^# n3fit-args:(.*)$", text, re.MULTILINE)
    return data, found.group(1).strip() if found else None


def _command_line(args: str | None, reader: _Reader) -> tuple[tuple[int, ...], int | None]:
    """The replicas and hyperopt trials of n3fit's arguments (``1 -r 8 --hyperopt 4``)."""
    if args is None:
        return (1,), None
    where = "n3fit-args"
    try:
        words = shlex.split(args)
    except ValueError as error:
        reader.refuse(where, f"{args!r}: {error}")
        return (1,), None
    first = last = trials = None
    index = 0
    while index < len(words):
        word = words[index]
        value = words[index + 1] if index + 1 < len(words) else None
        if word in ("-r", "--replica_range", "--hyperopt", "-o", "--output") and value is None:
            reader.refuse(where, f"{word} needs a value")
            break
        if word in ("-r", "--replica_range", "--hyperopt"):
            if not value.isdigit() or int(value) < 1:
                reader.refuse(where, f"{word} {value}: expected a positive integer")
            elif word == "--hyperopt":
                trials = int(value)
            else:
                last = int(value)
            index += 2
        elif word in ("-o", "--output"):  # the fit's folder: nothing hyperscan keeps
            index += 2
        elif word in ("--no-net", "--skip-md5-check"):
            index += 1
        elif word.isdigit() and first is None and int(word) >= 1:
            first = int(word)
            index += 1
        else:
            reader.refuse(where, f"{word!r}: not an n3fit argument hyperscan maps")
            index += 1
    first = first or 1
    if last is not None and last < first:
        reader.refuse(where, f"-r {last} ends before replica {first}")
        last = first
    return tuple(range(first, (last or first) + 1)), trials


def n3fit_to_hyperscan(
    card: Mapping[str, Any], *, args: str | None = None, theory: str | None = None
) -> ImportedCard:
    """An n3fit 4.1.5 runcard as a hyperscan fit runcard, or a scan runcard when it has
    ``hyperscan_config`` and ``kfold`` (n3fit's hyperopt).

    ``args`` are n3fit's arguments after the runcard (``1 -r 8``, ``1 --hyperopt 4``): the
    replicas and trials, which n3fit takes from its command line. ``theory`` is a theory
    folder (``data.real.theory``) for a theory other than the shipped data's 99000001. Every
    key is mapped or refused: :class:`N3fitError` lists every refused or unknown key at once.
    """
    reader = _Reader(card)
    replicas, trials = _command_line(args, reader)
    description = reader.take("description")
    if description is not _MISSING:
        reader.notes.append(f"n3fit description: {' '.join(str(description).split())}")
    data = _data(reader, theory)
    fit: dict[str, Any] = {"data": data}
    fit["seeds"] = {
        "data": reader.typed("integer", "mcseed", required=True, default=1),
        "split": reader.typed("integer", "trvlseed", required=True, default=2),
        "network": reader.typed("integer", "nnseed", required=True, default=3),
    }
    fit |= _fit_parameters(reader, bool(data.get("real", {}).get("positivity")))
    fit["preprocessing"] = _basis(reader)
    training: dict[str, Any] = {}
    debug = reader.typed("boolean", "debug", default=False)
    cores = reader.typed("integer", "maxcores", default=None)
    training["threads"] = cores if cores is not None else (1 if debug else None)
    if reader.typed("boolean", "double_precision", default=False):
        training["precision"] = "float64"
    fit["training"] = training
    sum_rules = reader.take("sum_rules")
    if sum_rules is not _MISSING and sum_rules not in (True, "ALL", "all"):
        reader.refuse(
            ("sum_rules",),
            f"{_shown(sum_rules)}: hyperscan imposes all of them (momentum and valence)",
        )
    for key in _ONLY:
        if not key.startswith(("parameters.", "fitting.", "closuretest.")):
            reader.only(key)
    for key in ("parallel_models", "save", "tensorboard"):
        reader.ignore(key)
    hyperopt = reader.section("hyperscan_config")
    kfold = reader.section("kfold")
    if (hyperopt is None) != (kfold is None):
        given, missing = (
            ("hyperscan_config", "kfold") if kfold is None else ("kfold", "hyperscan_config")
        )
        reader.refuse(
            missing,
            f"missing beside {given}: n3fit's hyperopt needs both (and a fit reads neither)",
        )
    if hyperopt is not None and kfold is not None:
        data = _scan(reader, fit, replicas, trials)
    else:
        data = {**fit, "replicas": replicas[-1] if replicas[0] == 1 else list(replicas)}
    if args is None:
        reader.notes.append(
            "no n3fit command line given (its '# n3fit-args:' line): "
            + ("1 replica per trial" if "scan" in data else "replica 1")
            + (", hyperscan's default scan.trials" if "scan" in data else "")
        )
    problems = list(reader.problems)
    unknown = [path for path in reader.unknown() if path]
    for path in unknown:
        why = _NO_EQUIVALENT.get(_plain(path))
        problems.append((_key(path), why or "not an n3fit runcard key that hyperscan maps"))
    if problems:
        raise N3fitError(f"cannot map to hyperscan (n3fit {N3FIT_VERSION} runcard)", problems)
    return ImportedCard(data, tuple(reader.notes))


def _data(reader: _Reader, theory: str | None) -> dict[str, Any]:
    """hyperscan's ``data``: datasets, cuts, t0, pseudodata, positivity sets, closure test."""
    real: dict[str, Any] = {}
    theory_id = _MISSING
    if reader.section("theory", required=True) is not None:
        theory_id = reader.typed("integer", "theory", "theoryid", required=True)
    if theory is not None:
        real["theory"] = theory
        named = re.fullmatch(r"theory_(\d+)", PurePath(theory).name)
        if named and theory_id is not _MISSING and int(named.group(1)) != theory_id:
            reader.refuse(
                ("theory", "theoryid"),
                f"{theory_id}, but the theory folder given is {PurePath(theory).name}",
            )
    elif theory_id is not _MISSING and theory_id != SHIPPED_THEORY_ID:
        reader.refuse(
            ("theory", "theoryid"),
            f"{theory_id}: hyperscan ships theory {SHIPPED_THEORY_ID} only (NLO DIS, LO "
            f"hadronic); give its theory_{theory_id} folder (--theory PATH)",
        )
    datasets = []
    fractions: dict[float, list[int]] = {}
    for index, _ in enumerate(reader.entries("dataset_inputs", required=True)):
        at = ("dataset_inputs", index)
        if reader.section(*at) is None:
            reader.refuse(at, "expected a mapping {dataset, frac, variant}")
            continue
        name = reader.typed("string", *at, "dataset", required=True)
        variant = reader.typed("string", *at, "variant", default=None)
        frac = reader.typed("number", *at, "frac", default=1)  # validphys' default
        fractions.setdefault(frac, []).append(index)
        cfac = reader.take(*at, "cfac")
        if cfac not in (_MISSING, None, [], ()):
            reader.refuse(
                (*at, "cfac"), f"{_shown(cfac)}: hyperscan applies no C-factors (real-data.md)"
            )
        weight = reader.take(*at, "weight")
        if weight is not _MISSING and weight != 1:
            reader.refuse((*at, "weight"), f"{_shown(weight)}: hyperscan weighs every dataset 1")
        group = reader.take(*at, "custom_group")
        if group not in (_MISSING, "unset"):
            reader.refuse((*at, "custom_group"), f"{_shown(group)}: hyperscan regroups no data")
        if name is _MISSING:
            continue
        if theory is None and name not in REAL_DATASETS:
            reader.refuse(
                (*at, "dataset"),
                f"{name}: not one of hyperscan's shipped datasets; give a theory folder holding "
                "its FK tables (--theory PATH)",
            )
        datasets.append({"dataset": name, "variant": variant})
    real["datasets"] = datasets
    if len(fractions) > 1:
        first = next(iter(fractions))
        for frac, indices in list(fractions.items())[1:]:
            reader.refuse(
                ("dataset_inputs", indices[0], "frac"),
                f"{_number(frac)}, where dataset_inputs[0] has {_number(first)}: hyperscan "
                "trains every dataset on one fraction (data.training_fraction)",
            )
    t0 = _MISSING
    if reader.section("datacuts", required=True) is not None:
        t0 = reader.typed("string", "datacuts", "t0pdfset", required=True)
    if t0 is not _MISSING and t0 != TOY_PDF_SET:
        reader.refuse(
            ("datacuts", "t0pdfset"),
            f"{t0}: hyperscan's t0 covariance is made with its toy PDF, {TOY_PDF_SET} in "
            "the n3fit peer kit",
        )
    for key in ("q2min", "w2min"):
        value = reader.typed("number", "datacuts", key)
        if value is not _MISSING:
            real[key] = value
    real["t0"] = True
    positivity = _positivity_sets(reader, theory)
    if positivity:
        real["positivity"] = positivity
    for index, _ in enumerate(reader.entries("integrability", "integdatasets")):
        reader.take("integrability", "integdatasets", index)
        reader.refuse(
            ("integrability", "integdatasets", index),
            "hyperscan has no integrability penalty (its fixed preprocessing keeps the "
            "integrals finite)",
        )
    reader.section("integrability")
    closure = _closure(reader)
    if closure is not None:
        real["closure"] = closure
    data: dict[str, Any] = {"real": real}
    if fractions:
        data["training_fraction"] = next(iter(fractions))
    data["pseudodata"] = reader.typed("boolean", "genrep", required=True, default=True)
    return data


def _positivity_sets(reader: _Reader, theory: str | None) -> list[str]:
    """The positivity sets' names; their maxlambda become positivity.max (`_fit_parameters`)."""
    reader.section("positivity")
    names = []
    for index, _ in enumerate(reader.entries("positivity", "posdatasets")):
        at = ("positivity", "posdatasets", index)
        if reader.section(*at) is None:
            reader.refuse(at, "expected a mapping {dataset, maxlambda}")
            continue
        name = reader.typed("string", *at, "dataset", required=True)
        reader.take(*at, "maxlambda", required=True)  # read with parameters.positivity
        if name is not _MISSING:
            names.append(name)
    if names and theory is None:
        reader.refuse(
            ("positivity", "posdatasets"),
            "positivity sets are read from a theory folder, and the shipped data have none "
            "(--theory PATH)",
        )
    return names


def _closure(reader: _Reader) -> dict[str, Any] | None:
    """``closuretest`` as data.real.closure: fake data from hyperscan's toy PDF."""
    if reader.section("closuretest") is None:
        return None
    reader.only("closuretest.errorsize")
    if not reader.typed("boolean", "closuretest", "fakedata", default=False):
        for key in ("fakepdf", "fakenoise", "filterseed"):
            reader.take("closuretest", key)  # unused by n3fit without fake data
        return None
    pdf = reader.typed("string", "closuretest", "fakepdf", required=True)
    if pdf is not _MISSING and pdf != TOY_PDF_SET:
        reader.refuse(
            ("closuretest", "fakepdf"),
            f"{pdf}: hyperscan's closure truth is its toy PDF, {TOY_PDF_SET} in the peer kit",
        )
    noise = reader.typed("boolean", "closuretest", "fakenoise", required=True, default=True)
    seed = reader.typed("integer", "closuretest", "filterseed", required=True, default=0)
    return {"level": 1 if noise else 0, "seed": seed}


def _fit_parameters(reader: _Reader, positivity_sets: bool) -> dict[str, Any]:
    """n3fit's ``parameters``: architecture, optimizer, epochs, stopping, positivity."""
    fit: dict[str, Any] = {}
    p = ("parameters",)
    reader.section(*p, required=True)
    nodes = reader.take(*p, "nodes_per_layer", required=True)
    activations = reader.take(*p, "activation_per_layer", required=True)
    architecture: dict[str, Any] = {}
    if nodes is not _MISSING:
        if (
            not isinstance(nodes, list)
            or len(nodes) < 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in nodes)
            or nodes[-1] != _OUTPUT_SIZE
        ):
            reader.refuse(
                (*p, "nodes_per_layer"),
                f"{_shown(nodes)}: hyperscan's network has hidden layers, then the "
                f"{_OUTPUT_SIZE} fitted flavours",
            )
        else:
            architecture["nodes"] = nodes[:-1]
    if activations is not _MISSING:
        if (
            not isinstance(activations, list)
            or len(activations) < 2
            or activations[-1] != "linear"
            or not all(a in _ACTIVATIONS for a in activations)
        ):
            reader.refuse(
                (*p, "activation_per_layer"),
                f"{_shown(activations)}: hyperscan's layers take {', '.join(_ACTIVATIONS)}, "
                "and its output layer is linear",
            )
        else:
            architecture["activations"] = activations[:-1]
    initializer = reader.typed("string", *p, "initializer", required=True)
    if initializer is not _MISSING:
        if initializer not in _INITIALIZERS:
            reader.refuse(
                (*p, "initializer"),
                f"{initializer}: hyperscan has {', '.join(_INITIALIZERS)} of n3fit's",
            )
        architecture["initializer"] = initializer
    fit["architecture"] = architecture
    optimizer = _optimizer(reader, (*p, "optimizer"), required=True)
    if optimizer is not None:
        fit["optimizer"] = optimizer
    epochs = reader.typed("integer", *p, "epochs", required=True)
    if epochs is not _MISSING:
        fit["epochs"] = epochs
    stopping: dict[str, Any] = {}
    patience = reader.typed("number", *p, "stopping_patience", required=True)
    if patience is not _MISSING:
        stopping["patience"] = patience
    stopping["threshold_chi2"] = reader.typed(
        "number", *p, "threshold_chi2", default=_N3FIT_CHI2_THRESHOLD
    )
    threshold = reader.typed("number", *p, "positivity", "threshold")
    if threshold is not _MISSING:
        stopping["positivity_threshold"] = threshold
    fit["stopping"] = stopping
    fit["positivity"] = _lambda(reader, positivity_sets)
    for key in ("parameters.layer_type", "parameters.dropout", "parameters.stopping_delta"):
        reader.only(key)
    if reader.section(*p, "integrability") is not None:
        for key in ("multiplier", "initial"):
            reader.take(*p, "integrability", key)
        reader.notes.append(
            "ignored: parameters.integrability (no integrability sets: it has no effect)"
        )
    return fit


def _optimizer(reader: _Reader, at: KeyPath, required: bool = False) -> dict[str, Any] | None:
    """An n3fit optimizer mapping as hyperscan's ``optimizer`` (n3fit's defaults filled in)."""
    if reader.section(*at, required=required) is None:
        return None
    name = reader.typed("string", *at, "optimizer_name", required=True)
    ours = {v: k for k, v in _OPTIMIZERS.items()}.get(name)
    if name is _MISSING:
        return None
    if ours is None:
        reader.refuse(
            (*at, "optimizer_name"),
            f"{name}: hyperscan has {', '.join(_OPTIMIZERS.values())} (not Adagrad, Adamax)",
        )
        return None
    # What n3fit's optimisers take besides the learning rate and clipnorm, at its defaults.
    fixed = {"Amsgrad": {"amsgrad": True}, "SGD": {"momentum": 0, "nesterov": False}}
    for key, value in fixed.get(name, {}).items():
        given = reader.take(*at, key)
        if given is not _MISSING and given != value:
            reader.refuse((*at, key), f"{_shown(given)}: hyperscan's {ours} has {_shown(value)}")
    rate = reader.typed("number", *at, "learning_rate", default=_N3FIT_LEARNING_RATE[name])
    clipnorm = reader.typed("number", *at, "clipnorm", default=_N3FIT_CLIPNORM)
    return {"name": ours, "learning_rate": rate, "clipnorm": clipnorm}


def _lambda(reader: _Reader, positivity_sets: bool) -> dict[str, Any]:
    """hyperscan's ``positivity`` from n3fit's initial, multiplier and the sets' maxlambda."""
    at = ("parameters", "positivity")
    reader.section(*at)
    initial = reader.typed("number", *at, "initial", default=None)
    multiplier = reader.typed("number", *at, "multiplier", default=None)
    if multiplier is not None:  # then n3fit does not use the sets' maxlambda
        if initial is None and positivity_sets:
            reader.refuse(
                (*at, "initial"),
                "missing beside a multiplier: n3fit then starts each set's lambda where it "
                "reaches its maxlambda, which hyperscan cannot: give initial",
            )
        return ({} if initial is None else {"initial": initial}) | {"multiplier": multiplier}
    sets = reader.at(("positivity", "posdatasets"))
    lambdas: set[float] = set()
    for index, entry in enumerate(sets if isinstance(sets, list) else []):
        value = entry.get("maxlambda", _MISSING) if isinstance(entry, Mapping) else _MISSING
        if value is _MISSING:
            continue  # refused where the sets are read
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            reader.refuse(
                ("positivity", "posdatasets", index, "maxlambda"),
                f"{_shown(value)}: expected a positive number",
            )
        else:
            lambdas.add(float(value))
    if len(lambdas) > 1:
        reader.refuse(
            ("positivity", "posdatasets"),
            f"maxlambda {', '.join(map(_shown, sorted(lambdas)))}: hyperscan grows one lambda "
            "for every set (positivity.max); give them one maxlambda, or a multiplier",
        )
        return {}
    if not positivity_sets or not lambdas:
        return {} if initial is None else {"initial": initial}
    # n3fit starts at 1 without an initial, and reaches maxlambda at the last update.
    return {"initial": 1.0 if initial is None else initial, "max": lambdas.pop()}


def _basis(reader: _Reader) -> dict[str, Any]:
    """n3fit's ``fitting.basis`` as hyperscan's ``preprocessing``."""
    if reader.section("fitting", required=True) is not None:
        reader.take("fitting", "fitbasis", required=True)
    reader.only("fitting.fitbasis")
    reader.ignore("fitting.savepseudodata")
    preprocessing: dict[str, Any] = {}
    names = {v: k for k, v in _FLAVOURS.items()}
    for index, _ in enumerate(reader.entries("fitting", "basis", required=True)):
        at = ("fitting", "basis", index)
        if reader.section(*at) is None:
            reader.refuse(at, "expected a mapping {fl, smallx, largex, trainable}")
            continue
        fl = reader.typed("string", *at, "fl", required=True)
        flavour = names.get(fl)
        if fl is not _MISSING and flavour is None:
            reader.refuse((*at, "fl"), f"{fl}: the EVOL basis has {', '.join(names)}")
        if reader.take(*at, "trainable") is not False:
            reader.refuse(
                (*at, "trainable"),
                "n3fit trains the exponents unless 'trainable: false'; hyperscan draws them "
                "once per replica and keeps them",
            )
        ranges = {}
        for key, ours in (("smallx", "alpha"), ("largex", "beta")):
            value = reader.take(*at, key, required=True)
            if value is not _MISSING:
                ranges[ours] = value
        if flavour is not None:
            if flavour in preprocessing:
                reader.refuse((*at, "fl"), f"{fl} appears twice")
            preprocessing[flavour] = ranges
    missing = [_FLAVOURS[f] for f in FLAVOURS if f not in preprocessing]
    if missing and reader.at(("fitting", "basis")) is not _MISSING:
        reader.refuse(("fitting", "basis"), f"lacks {', '.join(missing)}: EVOL fits all 8")
    return preprocessing


def _scan(
    reader: _Reader, fit: dict[str, Any], replicas: tuple[int, ...], trials: int | None
) -> dict[str, Any]:
    """The scan runcard of n3fit's ``hyperscan_config`` and ``kfold``."""
    space: dict[str, Any] = {}
    parameters: dict[str, Any] = {}
    h = ("hyperscan_config",)
    reader.section(*h, "stopping")
    low, high = (reader.typed("integer", *h, "stopping", k) for k in ("min_epochs", "max_epochs"))
    if (low is _MISSING) != (high is _MISSING):
        reader.refuse((*h, "stopping"), "n3fit draws the epochs with min_epochs and max_epochs")
    elif low is not _MISSING:
        parameters["epochs"] = {"low": low, "high": high}
    low, high = (
        reader.typed("number", *h, "stopping", k) for k in ("min_patience", "max_patience")
    )
    if low is not _MISSING or high is not _MISSING:
        low = 0.0 if low is _MISSING else low  # n3fit's defaults
        high = 1.0 if high is _MISSING else high
        if low <= 0:
            reader.refuse(
                (*h, "stopping", "min_patience"),
                f"{_number(low)} (n3fit's default when left out): a patience of 0 stops at "
                "once; hyperscan's is > 0",
            )
        step = float(f"{(high - low) / _PATIENCE_STEPS:.12g}")
        parameters["stopping.patience"] = {"low": low, "high": high, "step": step}
    _positivity_space(reader, fit, parameters)
    for index, _ in enumerate(reader.entries(*h, "optimizer")):
        entry = _optimizer_entry(reader, (*h, "optimizer", index), fit.get("optimizer", {}))
        if entry is not None:
            name, sub = entry
            if name in space.setdefault("optimizer", {}):
                reader.refuse((*h, "optimizer", index), f"{name} appears twice")
            space["optimizer"][name] = sub
    _architecture_space(reader, space, parameters)
    if parameters:
        space["parameters"] = parameters
    scan: dict[str, Any] = {"replicas": len(replicas)}
    if trials is not None:
        scan["trials"] = trials
    scan |= _objective(reader)
    scan["pruner"] = {"name": "none"}
    reader.notes.append("scan.pruner: none (n3fit's hyperopt trains every trial to its end)")
    reader.notes.append(
        "scan.sampler: hyperscan's default, Optuna's TPE (n3fit draws with hyperopt's TPE)"
    )
    scan["space"] = space
    return {**fit, "scan": scan}


def _positivity_space(reader: _Reader, fit: dict[str, Any], parameters: dict[str, Any]) -> None:
    at = ("hyperscan_config", "positivity")
    reader.section(*at)
    low, high = (reader.typed("number", *at, k) for k in ("min_multiplier", "max_multiplier"))
    if high is not _MISSING:
        low = 1.0 if low is _MISSING else low  # n3fit's default
        if low <= 1:
            reader.refuse(
                (*at, "min_multiplier"),
                f"{_number(low)}: hyperscan's multiplier grows lambda, so it is > 1",
            )
        parameters["positivity.multiplier"] = {"low": low, "high": high}
        base = fit.setdefault("positivity", {})
        if "multiplier" not in base:  # the base draws a multiplier: it has no max
            fit["positivity"] = {k: v for k, v in base.items() if k != "max"} | {"multiplier": low}
    elif low is not _MISSING:
        reader.refuse((*at, "max_multiplier"), "missing beside min_multiplier")
    low, high = (reader.typed("number", *at, k) for k in ("min_initial", "max_initial"))
    if (low is _MISSING) != (high is _MISSING):
        reader.refuse(at, "n3fit draws the initial lambda with min_initial and max_initial")
    elif low is not _MISSING:
        parameters["positivity.initial"] = {"low": low, "high": high, "log": True}
    elif "positivity.multiplier" in parameters and fit["data"]["real"].get("positivity"):
        reader.refuse(
            at,
            "a multiplier without min_initial, max_initial: n3fit then starts each "
            "set's lambda where it reaches its maxlambda, which hyperscan cannot",
        )


def _optimizer_entry(
    reader: _Reader, at: KeyPath, base: dict[str, Any]
) -> tuple[str, dict[str, Any]] | None:
    """One optimizer n3fit's hyperopt chooses, as a sub-space of scan.space.optimizer."""
    if reader.section(*at) is None:
        reader.refuse(at, "expected a mapping {optimizer_name, learning_rate, clipnorm}")
        return None
    name = reader.typed("string", *at, "optimizer_name", required=True)
    if name is _MISSING:
        return None
    ours = {v: k for k, v in _OPTIMIZERS.items()}.get(name)
    if ours is None:
        reader.refuse(
            (*at, "optimizer_name"),
            f"{name}: hyperscan has {', '.join(_OPTIMIZERS.values())} (not Adagrad, Adamax)",
        )
        return None
    sub: dict[str, Any] = {}
    defaults = {"learning_rate": _N3FIT_LEARNING_RATE[name], "clipnorm": _N3FIT_CLIPNORM}
    for key, default in defaults.items():
        value = reader.take(*at, key)
        if value is _MISSING:  # n3fit takes the optimiser's default, not the base runcard's
            if base.get(key) != default:
                sub[key] = {"choices": [default]}
        elif isinstance(value, int | float) and not isinstance(value, bool):
            sub[key] = {"choices": [float(value)]}
        elif isinstance(value, Mapping):
            reader.read.discard((*at, key))  # its keys are read one by one
            reader.opened.add((*at, key))
            low = reader.typed("number", *at, key, "min", required=True)
            high = reader.typed("number", *at, key, "max", required=True)
            sampling = reader.typed("string", *at, key, "sampling", default="uniform")
            if sampling not in ("uniform", "log"):
                reader.refuse((*at, key, "sampling"), f"{sampling}: n3fit has uniform, log")
            if low is not _MISSING and high is not _MISSING:
                sub[key] = {"low": float(low), "high": float(high), "log": sampling == "log"}
        else:
            reader.refuse((*at, key), f"{_shown(value)}: expected a number or {{min, max}}")
    return ours, sub


def _architecture_space(reader: _Reader, space: dict[str, Any], parameters: dict[str, Any]) -> None:
    at = ("hyperscan_config", "architecture")
    if reader.section(*at) is None:
        return
    initializers = reader.take(*at, "initializers")
    if initializers not in (_MISSING, None, []):
        if not isinstance(initializers, list) or not all(i in _INITIALIZERS for i in initializers):
            reader.refuse(
                (*at, "initializers"),
                f"{_shown(initializers)}: hyperscan has {', '.join(_INITIALIZERS)} of n3fit's",
            )
        else:
            parameters["architecture.initializer"] = {"choices": initializers}
    activations = reader.take(*at, "activations")
    if activations not in (_MISSING, None, []):
        if not isinstance(activations, list) or not all(a in _ACTIVATIONS for a in activations):
            reader.refuse(
                (*at, "activations"),
                f"{_shown(activations)}: hyperscan's layers take {', '.join(_ACTIVATIONS)}",
            )
        else:
            space["activation"] = activations
    drop = reader.typed("number", *at, "max_drop", default=None)
    if drop:
        reader.refuse((*at, "max_drop"), f"{_number(drop)}: hyperscan's network has no dropout")
    elif drop == 0:
        reader.notes.append("ignored: hyperscan_config.architecture.max_drop 0 (no dropout)")
    types = reader.take(*at, "layer_types")
    if types not in (_MISSING, None, []) and types != ["dense"]:
        reader.refuse((*at, "layer_types"), f"{_shown(types)}: hyperscan's layers are dense")
    layers = reader.take(*at, "n_layers")
    low = reader.typed("integer", *at, "min_units", default=None)
    high = reader.typed("integer", *at, "max_units", default=None)
    if layers in (_MISSING, None, []):
        return
    counts = sorted(set(layers)) if isinstance(layers, list) else []
    steps = {b - a for a, b in zip(counts, counts[1:], strict=False)}
    if (
        len(counts) < 2
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 2 for n in counts)
        or len(steps) > 1
    ):
        reader.refuse(
            (*at, "n_layers"),
            f"{_shown(layers)}: hyperscan draws the hidden layers from a range (low, high, "
            "step) of at least 2 values; n3fit counts the output layer, so each is >= 2",
        )
        return
    if low is None or high is None:
        reader.refuse(at, "n_layers needs min_units and max_units")
        return
    layers_range = {"low": counts[0] - 1, "high": counts[-1] - 1}
    if steps and steps != {1}:
        layers_range["step"] = steps.pop()
    space["layers"] = layers_range
    space["units"] = {"low": low, "high": high}


def _objective(reader: _Reader) -> dict[str, Any]:
    """``kfold`` as scan.folds and scan.objective."""
    k = ("kfold",)
    reader.ignore("kfold.target")
    folds = []
    for index, _ in enumerate(reader.entries(*k, "partitions", required=True)):
        at = (*k, "partitions", index)
        if reader.section(*at) is None:
            reader.refuse(at, "expected a mapping {datasets: [...]}")
            continue
        names = reader.take(*at, "datasets", required=True)
        if names is _MISSING:
            continue
        if not names or not isinstance(names, list):
            reader.refuse((*at, "datasets"), "an empty fold: hyperscan's folds hold datasets")
            continue
        folds.append(names)
    loss = reader.typed("string", *k, "loss_type", default="chi2")
    objective: dict[str, Any] = {"loss": loss}
    replica_statistic = reader.typed("string", *k, "replica_statistic", default="average")
    if loss == "chi2":
        objective["replica_statistic"] = replica_statistic
    elif replica_statistic != "average":
        reader.notes.append(f"ignored: kfold.replica_statistic (n3fit's {loss} does not use it)")
    objective["fold_statistic"] = reader.typed("string", *k, "fold_statistic", default="average")
    objective["best_fraction"] = reader.typed(
        "number", *k, "reduce_proportion", default=_N3FIT_REDUCE_PROPORTION
    )
    penalties = reader.take(*k, "penalties")
    if penalties not in (_MISSING, None):
        objective["penalties"] = penalties
    objective["penalties_in_loss"] = reader.typed("boolean", *k, "penalties_in_loss", default=False)
    threshold = reader.typed("number", *k, "threshold", default=_N3FIT_FOLD_THRESHOLD)
    objective["threshold"] = None if math.isinf(threshold) else threshold
    return {"folds": folds, "objective": objective}
