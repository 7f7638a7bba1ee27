# SPDX-License-Identifier: GPL-3.0-or-later
"""Search space (hyperscan.runcard.Space) -> Optuna parameters -> fit runcard of a trial ->
exported file."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import optuna
import pytest

from hyperscan.runcard import (
    FitRuncard,
    Range,
    RuncardError,
    ScanRuncard,
    load_fit_runcard,
    load_scan_runcard,
    parse_fit_runcard,
    parse_scan_runcard,
)
from hyperscan.scan._export import export_text

optuna.logging.set_verbosity(optuna.logging.WARNING)

STUDIES = Path(__file__).resolve().parents[2] / "studies"

SCAN = """
replicas: 7
architecture: {nodes: [20, 10], activations: [tanh, tanh], initializer: he_normal}
optimizer: {name: adam, learning_rate: 1.0e-3, clipnorm: 0.5}
epochs: 3000
positivity: {initial: 10, max: 1.0e5}
scan:
  replicas: 3
  space:
    optimizer:
      nadam: {learning_rate: {low: 1.0e-4, high: 1.0e-2, log: true},
              clipnorm: {low: 1.0e-6, high: 1.0e-2, log: true}}
      adam: {learning_rate: {low: 1.0e-4, high: 1.0e-2, log: true}}
      sgd: {clipnorm: {choices: [null, 0.1]}}
    layers: {low: 1, high: 4}
    units: {low: 10, high: 45, step: 5}
    activation: [tanh, sigmoid]
    parameters:
      epochs: {low: 500, high: 2000, step: 100}
      stopping.patience: {low: 0.1, high: 0.3}
      positivity.initial: {low: 1, high: 1000, log: true}
      positivity.multiplier: {low: 1.01, high: 1.2}
      architecture.initializer: {choices: [glorot_normal, glorot_uniform]}
      data.pseudodata: {choices: [true, false]}
"""


@pytest.fixture(scope="module")
def runcard() -> ScanRuncard:
    return parse_scan_runcard(SCAN, "scan.yml")


@pytest.fixture(scope="module")
def study(runcard: ScanRuncard) -> optuna.Study:
    """A study whose trials drew points of the space with TPE (after random start-up)."""
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=1, n_startup_trials=20))

    def objective(trial: optuna.Trial) -> float:
        params = runcard.scan.space.suggest(trial)
        assert params == trial.params
        return math.log(params.get("adam.learning_rate", 1.0)) + params.get("layers", 0)

    study.optimize(objective, n_trials=120)
    return study


def _inside(dist: Range, value: Any) -> bool:
    if dist.is_int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        step = dist.step or 1
        return ok and dist.low <= value <= dist.high and (value - dist.low) % step == 0
    return isinstance(value, float) and dist.low <= value <= dist.high


def test_conditional_names_follow_the_draw(runcard: ScanRuncard, study: optuna.Study) -> None:
    space = runcard.scan.space
    assert space.optimizer is not None and space.layers is not None and space.units is not None
    seen_optimizers = set()
    seen_layers = set()
    for trial in study.trials:
        params = trial.params
        name = params["optimizer"]
        seen_optimizers.add(name)
        sub = space.optimizer[name]
        expected = {f"{name}.{key}" for key in ("learning_rate", "clipnorm") if getattr(sub, key)}
        conditional = {p for p in params if p.split(".")[0] in space.optimizer}
        assert conditional == expected, params
        layers = params["layers"]
        seen_layers.add(layers)
        assert {p for p in params if p.startswith("units_")} == {
            f"units_{k}" for k in range(1, layers + 1)
        }
        others = set(params) - conditional - {"optimizer", "layers", "activation"}
        others -= {f"units_{k}" for k in range(1, layers + 1)}
        assert others == set(space.parameters)
        # Each optimiser keeps its own learning-rate distribution (TPE models them apart).
        assert set(trial.distributions) == set(params)
    assert seen_optimizers == {"nadam", "adam", "sgd"}
    assert seen_layers == {1, 2, 3, 4}


def test_values_inside_ranges_and_ints_are_ints(runcard: ScanRuncard, study: optuna.Study) -> None:
    space = runcard.scan.space
    assert space.optimizer is not None and space.layers is not None and space.units is not None
    for trial in study.trials:
        params = trial.params
        assert _inside(space.layers, params["layers"])
        for k in range(1, params["layers"] + 1):
            assert _inside(space.units, params[f"units_{k}"])
        name = params["optimizer"]
        for key in ("learning_rate", "clipnorm"):
            dist = getattr(space.optimizer[name], key)
            if isinstance(dist, Range):
                assert _inside(dist, params[f"{name}.{key}"])
            elif dist is not None:
                assert params[f"{name}.{key}"] in dist.choices
        assert params["activation"] in ("tanh", "sigmoid")
        for path, dist in space.parameters.items():
            if isinstance(dist, Range):
                assert _inside(dist, params[path]), (path, params[path])
            else:
                assert params[path] in dist.choices
        assert type(params["epochs"]) is int
        assert type(params["positivity.initial"]) is float
        assert type(params["data.pseudodata"]) is bool


def test_trial_runcard_applies_every_parameter(runcard: ScanRuncard, study: optuna.Study) -> None:
    for trial in study.trials:
        params = trial.params
        fit = runcard.trial_runcard(params)
        assert type(fit) is FitRuncard
        name = params["optimizer"]
        assert fit.optimizer.name == name
        assert fit.optimizer.learning_rate == params.get(f"{name}.learning_rate", 1.0e-3)
        assert fit.optimizer.clipnorm == params.get(f"{name}.clipnorm", 0.5)
        layers = params["layers"]
        assert fit.architecture.nodes == tuple(params[f"units_{k}"] for k in range(1, layers + 1))
        assert fit.architecture.activations == (params["activation"],) * layers
        assert fit.architecture.initializer == params["architecture.initializer"]
        assert fit.epochs == params["epochs"]
        assert fit.stopping.patience == params["stopping.patience"]
        assert fit.positivity.initial == params["positivity.initial"]
        assert fit.positivity.multiplier == params["positivity.multiplier"]
        assert fit.positivity.max is None  # the searched multiplier replaces the base max
        assert fit.data.pseudodata is params["data.pseudodata"]
        # The trial's replicas, whatever the top-level replicas of the base.
        assert fit.replicas == (1, 2, 3)
        # Untouched settings keep the base values.
        assert fit.seeds == runcard.fit.seeds
        assert fit.preprocessing == runcard.fit.preprocessing


def test_suggest_is_reproduced_by_a_fixed_trial(runcard: ScanRuncard, study: optuna.Study) -> None:
    for trial in study.trials[:20]:
        fixed = optuna.trial.FixedTrial(trial.params)
        assert runcard.scan.space.suggest(fixed) == trial.params


def test_stored_integers_may_come_back_as_floats(runcard: ScanRuncard) -> None:
    params = {
        "optimizer": "sgd",
        "sgd.clipnorm": None,
        "layers": 2.0,
        "units_1": 15.0,
        "units_2": 20,
        "activation": "sigmoid",
        "epochs": 600.0,
        "stopping.patience": 0.2,
        "positivity.initial": 5,
        "positivity.multiplier": 1.1,
        "architecture.initializer": "glorot_uniform",
        "data.pseudodata": False,
    }
    fit = runcard.trial_runcard(params)
    assert fit.architecture.nodes == (15, 20)
    assert fit.epochs == 600
    assert fit.optimizer.clipnorm is None
    assert fit.optimizer.learning_rate == 1.0e-3


def _some_params(runcard: ScanRuncard) -> dict[str, Any]:
    return runcard.scan.space.suggest(
        optuna.create_study(sampler=optuna.samplers.RandomSampler(0)).ask()
    )


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda p: p.pop("epochs"), "missing epochs"),
        (lambda p: p.pop("units_1"), "missing units_1"),
        (lambda p: p.update({"units_9": 10}), "not in the space: units_9"),
        (lambda p: p.update({"foo": 1}), "not in the space: foo"),
        (lambda p: p.update({"optimizer": "rmsprop"}), "optimizer 'rmsprop' is not in the space"),
        (lambda p: p.update({"layers": 0}), "layers must be an integer >= 1"),
    ],
    ids=["missing", "missing-unit", "extra-unit", "unknown", "other-optimizer", "zero-layers"],
)
def test_params_of_another_space_are_refused(runcard: ScanRuncard, change, fragment) -> None:
    params = _some_params(runcard)
    change(params)
    with pytest.raises(ValueError, match=fragment):
        runcard.trial_runcard(params)


def test_other_optimizers_parameters_are_refused(runcard: ScanRuncard) -> None:
    params = _some_params(runcard)
    params.update({"optimizer": "sgd", "sgd.clipnorm": 0.1, "adam.learning_rate": 1.0e-3})
    params.pop("nadam.learning_rate", None)
    params.pop("nadam.clipnorm", None)
    with pytest.raises(ValueError, match="not in the space: adam.learning_rate"):
        runcard.trial_runcard(params)


def test_invalid_combination_is_a_runcard_error() -> None:
    runcard = parse_scan_runcard(
        "scan: {space: {parameters: {positivity.initial: {low: 1, high: 1.0e4},"
        " positivity.max: {low: 1000, high: 1.0e6}}}}"
    )
    ok = runcard.trial_runcard({"positivity.initial": 10.0, "positivity.max": 1.0e4})
    assert (ok.positivity.initial, ok.positivity.max) == (10.0, 1.0e4)
    with pytest.raises(RuncardError) as excinfo:
        runcard.trial_runcard({"positivity.initial": 5000.0, "positivity.max": 2000.0})
    assert excinfo.value.source == "<trial parameters>"
    assert excinfo.value.problems[0][0] == "positivity.max"


def test_activation_without_layers_and_layers_without_activation() -> None:
    only_activation = parse_scan_runcard(
        "architecture: {nodes: [8, 8, 8]}\nscan: {space: {activation: [sigmoid, elu]}}"
    )
    fit = only_activation.trial_runcard({"activation": "elu"})
    assert fit.architecture.nodes == (8, 8, 8)
    assert fit.architecture.activations == ("elu", "elu", "elu")
    only_layers = parse_scan_runcard(
        "architecture: {nodes: [8, 8], activations: [sigmoid, sigmoid]}\n"
        "scan: {space: {layers: {low: 1, high: 3}, units: {low: 2, high: 9}}}"
    )
    fit = only_layers.trial_runcard({"layers": 3, "units_1": 2, "units_2": 5, "units_3": 9})
    assert fit.architecture.nodes == (2, 5, 9)
    assert fit.architecture.activations == ("sigmoid",) * 3


def test_single_optimizer_parameter_without_optimizer_space() -> None:
    runcard = parse_scan_runcard(
        "optimizer: {name: sgd}\nscan: {space: {parameters:"
        " {optimizer.learning_rate: {low: 1.0e-3, high: 1.0e-1, log: true}}}}"
    )
    trial = optuna.create_study().ask()
    params = runcard.scan.space.suggest(trial)
    assert list(params) == ["optimizer.learning_rate"]
    fit = runcard.trial_runcard(params)
    assert fit.optimizer.name == "sgd"
    assert fit.optimizer.learning_rate == params["optimizer.learning_rate"]


def test_export_loads_back(runcard: ScanRuncard, study: optuna.Study, tmp_path: Path) -> None:
    best = study.best_trial
    provenance = {
        "study": "demo",
        "trial": best.number,
        "value": best.value,
        "date": "2025-01-01T00:00:00+00:00",
        "hyperscan": "0.1.0",
        "note": "two\nlines",
    }
    text = export_text(runcard, best.params, provenance)
    fixed = runcard.trial_runcard(best.params)
    assert parse_fit_runcard(text) == fixed
    path = tmp_path / "best.yml"
    path.write_text(text)
    assert load_fit_runcard(path) == fixed
    lines = text.splitlines()
    header = [line for line in lines if line.startswith("#")]
    assert "# study: demo" in header
    assert f"# trial: {best.number}" in header
    assert f"# value: {best.value}" in header
    assert "# date: 2025-01-01T00:00:00+00:00" in header
    assert "# hyperscan: 0.1.0" in header
    assert "# note: two lines" in header
    assert lines[: len(header)] == header  # a header, then the runcard
    assert "\nscan:" not in text


@pytest.mark.parametrize("name", ["quickstart-scan.yml", "kfold-scan.yml"])
def test_study_files_suggest_and_fix(name: str) -> None:
    runcard = load_scan_runcard(STUDIES / name)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    for _ in range(20):
        trial = study.ask()
        params = runcard.scan.space.suggest(trial)
        fit = runcard.trial_runcard(params)
        assert fit.replica_ids == (1, 2)
        assert 1 <= len(fit.architecture.nodes) <= 2
        assert all(8 <= n <= 30 for n in fit.architecture.nodes)
        assert 1.0e-3 <= fit.optimizer.learning_rate <= 3.0e-2
        assert fit.optimizer.clipnorm is not None and 1.0e-4 <= fit.optimizer.clipnorm <= 1.0e-1
        assert parse_fit_runcard(export_text(runcard, params, {"trial": trial.number})) == fit
        study.tell(trial, 1.0)


def test_kfold_study_folds_hold_out_only_what_the_fit_still_measures() -> None:
    """NNPDF's advice: no fold whose data only the fit could extrapolate to. Every dataset a
    fold holds out has a twin of the same observable (the name's last part) that the fold
    still fits and that reaches at least as low in x; each fold mixes three observables."""
    from hyperscan.data import closure_problem  # hyperscan's own: an import error must fail

    runcard = load_scan_runcard(STUDIES / "kfold-scan.yml")
    smallest_x = {
        d.name: float(d.kinematics[:, 0].min())
        for d in closure_problem(runcard.fit.data.closure.size).datasets
    }
    in_folds = [name for fold in runcard.scan.folds for name in fold]
    assert len(set(in_folds)) == len(in_folds) and set(in_folds) <= set(smallest_x)
    for fold in runcard.scan.folds:
        observables = {name.rsplit("_", 1)[1] for name in fold}
        assert len(observables) == len(fold) == 3, fold
        fitted = [name for name in smallest_x if name not in fold]
        for name in fold:
            twins = [t for t in fitted if t.rsplit("_", 1)[1] == name.rsplit("_", 1)[1]]
            assert any(smallest_x[t] <= smallest_x[name] for t in twins), (name, twins)


def test_dimensions_name_every_parameter_and_its_condition(runcard: ScanRuncard) -> None:
    dimensions = {d.name: d for d in runcard.scan.space.dimensions}
    assert list(dimensions)[:7] == [
        "optimizer",
        "nadam.learning_rate",
        "nadam.clipnorm",
        "adam.learning_rate",
        "sgd.clipnorm",
        "layers",
        "units_1",
    ]
    assert set(dimensions) - {"optimizer", "layers", "activation"} == {
        "nadam.learning_rate",
        "nadam.clipnorm",
        "adam.learning_rate",
        "sgd.clipnorm",
        *(f"units_{k}" for k in range(1, 5)),
        *runcard.scan.space.parameters,
    }
    assert dimensions["adam.learning_rate"].when == ("optimizer", ("adam",))
    assert dimensions["units_3"].when == ("layers", (3, 4))
    assert dimensions["units_1"].distribution == runcard.scan.space.units
    assert dimensions["epochs"].when is None


def test_apply_keeps_what_the_space_does_not_draw(runcard: ScanRuncard) -> None:
    """Space.apply changes only the drawn settings: a trial's replicas and folds come from
    ScanRuncard.trial_runcard."""
    params = _some_params(runcard)
    fit = runcard.scan.space.apply(runcard.fit, params)
    assert fit.replicas == runcard.fit.replicas == 7
    trial = runcard.trial_runcard(params)
    assert fit == trial.model_copy(update={"replicas": 7})
