# SPDX-License-Identifier: GPL-3.0-or-later
"""Scan runcards: a fit part plus ``scan:``, whose space is checked against the fit schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperscan.runcard import (
    Choices,
    FitRuncard,
    Range,
    RuncardError,
    ScanRuncard,
    dump_runcard,
    load_fit_runcard,
    load_runcard,
    load_scan_runcard,
    parse_fit_runcard,
    parse_scan_runcard,
    runcard_from_dict,
    scan_runcard_from_dict,
    with_settings,
)

STUDIES = Path(__file__).resolve().parents[2] / "studies"

FIT = """
data: {closure: {size: tiny, level: 0}}
replicas: 3
architecture: {nodes: [20, 10], activations: [tanh, tanh]}
optimizer: {name: adam, learning_rate: 1.0e-3, clipnorm: null}
epochs: 3000
positivity: {initial: 10, max: 1.0e5}
"""

SCAN = """
scan:
  trials: 120
  replicas: 5
  folds: [[A, B], [C]]
  objective:
    chi2: held_out
    statistic: trimmed_mean
    best_fraction: 0.8
    std_weight: 0.5
    fold_statistic: max
  sampler: {name: random, seed: null}
  pruner: {name: hyperband, report_every: 3, warmup_reports: 0}
  divergence: {max_diverged: 2}
  space:
    optimizer:
      nadam: {learning_rate: {low: 1.0e-4, high: 1.0e-2, log: true},
              clipnorm: {low: 1.0e-6, high: 1.0e-2, log: true}}
      adam: {learning_rate: {low: 1.0e-4, high: 1.0e-2, log: true}}
      sgd: {}
    layers: {low: 1, high: 3}
    units: {low: 10, high: 45}
    activation: [tanh, sigmoid]
    parameters:
      epochs: {low: 500, high: 2000, step: 100}
      stopping.patience: {low: 0.1, high: 0.3}
      positivity.initial: {low: 1, high: 1000, log: true}
      architecture.initializer: {choices: [glorot_normal, glorot_uniform]}
      data.pseudodata: {choices: [true, false]}
"""

FULL = FIT + SCAN


def test_full_scan_runcard_loads(tmp_path: Path) -> None:
    path = tmp_path / "scan.yml"
    path.write_text(FULL)
    runcard = load_scan_runcard(path)
    assert isinstance(runcard, ScanRuncard)
    assert type(runcard.fit) is FitRuncard
    scan = runcard.scan
    assert (scan.trials, scan.replicas) == (120, 5)
    assert scan.folds == (("A", "B"), ("C",))
    assert scan.members == 10
    assert scan.objective.chi2 == "held_out"
    assert scan.objective.statistic == "trimmed_mean"
    assert scan.objective.best_fraction == 0.8
    assert scan.objective.std_weight == 0.5
    assert scan.objective.fold_statistic == "max"
    assert scan.sampler.name == "random" and scan.sampler.seed is None
    assert (scan.pruner.name, scan.pruner.report_every, scan.pruner.warmup_reports) == (
        "hyperband",
        3,
        0,
    )
    assert scan.divergence.max_diverged == 2
    space = scan.space
    assert space.optimizer is not None
    assert list(space.optimizer) == ["nadam", "adam", "sgd"]
    assert space.optimizer["nadam"].learning_rate == Range(low=1.0e-4, high=1.0e-2, log=True)
    assert space.optimizer["adam"].clipnorm is None
    assert space.optimizer["sgd"].learning_rate is None
    assert space.layers == Range(low=1, high=3)
    assert space.activation == ("tanh", "sigmoid")
    assert space.parameters["architecture.initializer"] == Choices(
        choices=("glorot_normal", "glorot_uniform")
    )
    assert space.parameters["data.pseudodata"] == Choices(choices=(True, False))
    # The fit part is the base runcard.
    assert runcard.fit.epochs == 3000
    assert runcard.fit.optimizer.name == "adam"
    # scan.replicas overrides the top-level replicas.
    assert runcard.fit.replicas == 3
    assert runcard.scan.replica_ids == (1, 2, 3, 4, 5)


def test_int_and_float_ranges_keep_their_kind() -> None:
    space = parse_scan_runcard(FULL).scan.space
    epochs = space.parameters["epochs"]
    assert isinstance(epochs, Range) and epochs.is_int
    assert isinstance(epochs.low, int) and isinstance(epochs.step, int)
    # Integer bounds of a float setting become floats: it is drawn as a float.
    initial = space.parameters["positivity.initial"]
    assert isinstance(initial, Range) and not initial.is_int
    assert initial.low == 1.0 and isinstance(initial.low, float)
    assert space.layers is not None and space.layers.is_int
    assert space.units is not None and space.units.is_int


def test_defaults() -> None:
    runcard = parse_scan_runcard("scan: {space: {activation: [tanh, sigmoid]}}\n")
    scan = runcard.scan
    assert scan.trials == 50
    assert scan.replicas == 4
    assert scan.folds == ()
    assert scan.members == 4
    objective = scan.objective
    assert (objective.chi2, objective.statistic, objective.fold_statistic) == (
        "validation",
        "mean",
        "mean",
    )
    assert (objective.best_fraction, objective.std_weight) == (0.85, 1.0)
    assert (scan.sampler.name, scan.sampler.seed) == ("tpe", 0)
    assert (scan.pruner.name, scan.pruner.report_every, scan.pruner.warmup_reports) == (
        "median",
        5,
        2,
    )
    assert scan.divergence.max_diverged == 0
    space = scan.space
    assert space.optimizer is None and space.layers is None and space.units is None
    assert space.parameters == {}
    assert Range(low=1, high=2).log is False and Range(low=1, high=2).step is None
    # The fit part takes the fit defaults.
    assert runcard.fit == FitRuncard()


def test_held_out_allowed_with_folds_and_validation_too() -> None:
    space = "space: {activation: [tanh]}"
    for chi2 in ("validation", "held_out"):
        runcard = parse_scan_runcard(
            f"scan: {{folds: [[A], [B]], objective: {{chi2: {chi2}}}, {space}}}"
        )
        assert runcard.scan.objective.chi2 == chi2


def test_a_k_fold_scan_scores_its_folds_unless_told_otherwise() -> None:
    """n3fit's hyperopt scores the held-out folds; without folds there is only validation."""
    space = "space: {activation: [tanh]}"
    with_folds = parse_scan_runcard(f"scan: {{folds: [[A], [B]], {space}}}")
    assert with_folds.scan.objective.chi2 == "held_out"
    kept = parse_scan_runcard(
        f"scan: {{folds: [[A], [B]], objective: {{statistic: max}}, {space}}}"
    )
    assert (kept.scan.objective.chi2, kept.scan.objective.statistic) == ("held_out", "max")
    assert parse_scan_runcard(f"scan: {{{space}}}").scan.objective.chi2 == "validation"


def test_load_runcard_dispatches(tmp_path: Path) -> None:
    fit_path = tmp_path / "fit.yml"
    fit_path.write_text(FIT)
    scan_path = tmp_path / "scan.yml"
    scan_path.write_text(FULL)
    fit = load_runcard(fit_path)
    scan = load_runcard(scan_path)
    assert type(fit) is FitRuncard
    assert type(scan) is ScanRuncard
    assert scan == load_scan_runcard(scan_path)
    assert fit == load_fit_runcard(fit_path)
    assert scan.fit == fit


def test_load_runcard_reports_scan_errors_and_file_errors(tmp_path: Path) -> None:
    path = tmp_path / "scan.yml"
    path.write_text("scan: {trials: 0, space: {activation: [tanh]}}\n")
    with pytest.raises(RuncardError) as excinfo:
        load_runcard(path)
    assert excinfo.value.problems == [("scan.trials", "must be >= 1, got 0")]
    assert excinfo.value.path == str(path)
    with pytest.raises(RuncardError, match="file not found"):
        load_runcard(tmp_path / "nope.yml")
    # A fit runcard is checked as a fit runcard: 'scan' is not there to suggest.
    path.write_text("epoch: 10\n")
    with pytest.raises(RuncardError, match="did you mean 'epochs'"):
        load_runcard(path)


def test_fit_part_round_trip() -> None:
    scan = parse_scan_runcard(FULL)
    part = scan.fit.model_dump(mode="json")
    assert "scan" not in part
    fit = runcard_from_dict(part)
    assert type(fit) is FitRuncard and fit == scan.fit
    assert fit == parse_fit_runcard(FIT)
    assert parse_fit_runcard(dump_runcard(fit)) == fit


def test_scan_runcard_dump_round_trip() -> None:
    scan = parse_scan_runcard(FULL)
    text = dump_runcard(scan, header="a scan")
    assert text.startswith("# a scan\n")
    again = parse_scan_runcard(text)
    assert again == scan
    assert hash(again) == hash(scan)
    assert scan_runcard_from_dict(scan.model_dump(mode="json")) == scan


def test_scan_section_is_required_for_a_scan_runcard() -> None:
    with pytest.raises(RuncardError) as excinfo:
        scan_runcard_from_dict({"epochs": 10}, source="x")
    assert excinfo.value.problems == [("scan", "required key is missing")]


@pytest.mark.parametrize(
    ("card", "key"), [({"scan": None}, "scan"), ({"scan": {"space": None}}, "scan.space")]
)
def test_a_required_section_left_empty_is_not_said_to_be_optional(card, key) -> None:
    """Leaving out `scan` or `scan.space`, as an optional section's hint would advise, fails."""
    with pytest.raises(RuncardError) as excinfo:
        scan_runcard_from_dict(card, source="x")
    assert excinfo.value.problems == [(key, "expected a mapping, got null")]
    with pytest.raises(RuncardError) as excinfo:
        parse_scan_runcard(FULL + "stopping: null\n")
    assert excinfo.value.problems == [
        ("stopping", "expected a mapping, got null (leave the section out to use its defaults)")
    ]


def _positivity_space(initial: tuple[float, float], maximum: tuple[float, float]) -> str:
    return FIT.replace("positivity: {initial: 10, max: 1.0e5}\n", "") + (
        "scan:\n  space:\n    parameters:\n"
        f"      positivity.initial: {{low: {initial[0]}, high: {initial[1]}}}\n"
        f"      positivity.max: {{low: {maximum[0]}, high: {maximum[1]}}}\n"
    )


def test_a_space_with_no_valid_combination_is_found() -> None:
    """Each value passes alone, but every max is below every initial: every trial would be
    trashed. Found for a new study (`study create`, `scan`); the schema itself, which also
    reads stored studies, accepts the space."""
    runcard = parse_scan_runcard(_positivity_space((5.0e5, 9.0e5), (2.0e5, 4.0e5)))
    [(where, message)] = runcard.scan.space.joint_problems(runcard.fit)
    assert where == "scan.space.parameters"
    assert message.startswith(
        "none of 256 draws from the space makes a valid fit runcard, so nearly every trial "
        "would be trashed; e.g. with positivity.initial = "
    )
    assert "positivity.max: must be >= initial" in message


@pytest.mark.parametrize(
    ("initial", "maximum"),
    [((5.0e5, 9.0e5), (2.0e5, 6.0e5)), ((1000.1, 1000.9), (1000.05, 1000.95))],
)
def test_a_space_with_valid_combinations_passes(initial, maximum) -> None:
    """Where some combinations are valid, the others are trashed trial by trial, by design;
    narrow ranges are drawn at full precision, not rounded onto one invalid value."""
    runcard = parse_scan_runcard(_positivity_space(initial, maximum))
    assert runcard.scan.space.joint_problems(runcard.fit) == []


def test_with_settings() -> None:
    base = parse_scan_runcard(FULL).fit.model_dump(mode="json")
    data = with_settings(base, {"epochs": 10, "optimizer.name": "sgd"})
    assert data["epochs"] == 10 and data["optimizer"]["name"] == "sgd"
    assert base["epochs"] == 3000  # a copy
    # Searching the multiplier clears the default max; searching max clears a multiplier.
    fit = runcard_from_dict(with_settings(base, {"positivity.multiplier": 1.1}))
    assert (fit.positivity.max, fit.positivity.multiplier) == (None, 1.1)
    back = runcard_from_dict(with_settings(fit.model_dump(mode="json"), {"positivity.max": 1.0e4}))
    assert (back.positivity.max, back.positivity.multiplier) == (1.0e4, None)


def test_exclusive_settings_can_be_searched() -> None:
    text = "scan: {space: {parameters: {positivity.multiplier: {low: 1.01, high: 1.2}}}}\n"
    runcard = parse_scan_runcard(text)
    assert runcard.fit.positivity.max == 1.0e6  # the base keeps its default
    assert parse_scan_runcard(dump_runcard(runcard)) == runcard


# (id, scan runcard text, expected key path, fragment of the message)
BAD = [
    (
        "unknown-path-with-suggestion",
        "scan: {space: {parameters: {stoping.patience: {low: 0.1, high: 0.3}}}}",
        "scan.space.parameters.stoping.patience",
        "unknown setting 'stoping.patience' (did you mean 'stopping.patience'?)",
    ),
    (
        "unknown-path-lists-settings",
        "scan: {space: {parameters: {xyz: {low: 1, high: 2}}}}",
        "scan.space.parameters.xyz",
        "searchable settings: data.training_fraction",
    ),
    (
        "low-above-high",
        "scan: {space: {parameters: {epochs: {low: 2000, high: 500}}}}",
        "scan.space.parameters.epochs.high",
        "expected low < high, got low 2000 >= high 500",
    ),
    (
        "low-equals-high",
        "scan: {space: {layers: {low: 2, high: 2}, units: {low: 5, high: 9}}}",
        "scan.space.layers.high",
        "set it in the base runcard",
    ),
    (
        "log-with-zero-low",
        "scan: {space: {parameters: {positivity.initial: {low: 0, high: 10, log: true}}}}",
        "scan.space.parameters.positivity.initial.low",
        "a log range needs low > 0, got low 0",
    ),
    (
        "log-with-step",
        "scan: {space: {parameters: {epochs: {low: 100, high: 200, log: true, step: 10}}}}",
        "scan.space.parameters.epochs.step",
        "cannot be combined with 'log: true'",
    ),
    (
        "step-not-dividing",
        "scan: {space: {parameters: {epochs: {low: 100, high: 205, step: 10}}}}",
        "scan.space.parameters.epochs.step",
        "high - low (105) must be a multiple of step (10)",
    ),
    (
        "int-field-float-bounds",
        "scan: {space: {parameters: {epochs: {low: 500, high: 2000.5}}}}",
        "scan.space.parameters.epochs.high",
        "epochs is an integer setting: expected an integer, got the number 2000.5",
    ),
    (
        "int-field-integral-float",
        "scan: {space: {parameters: {epochs: {low: 5.0e2, high: 2000}}}}",
        "scan.space.parameters.epochs.low",
        "(write 500)",
    ),
    (
        "choice-invalid-for-field",
        "scan: {space: {parameters: {architecture.initializer: "
        "{choices: [glorot_normal, glorot_unifrom]}}}}",
        "scan.space.parameters.architecture.initializer.choices[1]",
        "did you mean 'glorot_uniform'?",
    ),
    (
        "choice-wrong-type",
        "scan: {space: {parameters: {epochs: {choices: [100, 1.5]}}}}",
        "scan.space.parameters.epochs.choices[1]",
        "expected an integer, got the number 1.5",
    ),
    (
        "choice-not-a-scalar",
        "scan: {space: {parameters: {epochs: {choices: [100, [1]]}}}}",
        "scan.space.parameters.epochs.choices[1]",
        "expected a number, a string, a boolean or null, got a list",
    ),
    (
        "range-for-a-literal",
        "scan: {space: {parameters: {training.precision: {low: 32, high: 64}}}}",
        "scan.space.parameters.training.precision",
        "takes one of 'float32', 'float64': give {choices: [...]} instead of a range",
    ),
    (
        "huge-replicas",
        "scan: {replicas: 99999999999, space: {optimizer: {adam: {}}}}",
        "scan.replicas",
        "must be <= 10000",
    ),
    (
        "huge-units",
        "scan: {space: {layers: {low: 1, high: 2}, units: {low: 5, high: 99999999999}}}",
        "scan.space.units.high",
        "must be <= 10000",
    ),
    (
        "learning-rate-negative",
        "scan: {space: {optimizer: {nadam: {learning_rate: {low: -1.0e-3, high: 1.0e-2}}}}}",
        "scan.space.optimizer.nadam.learning_rate.low",
        "must be > 0, got -0.001",
    ),
    (
        "learning-rate-negative-in-parameters",
        "scan: {space: {parameters: {optimizer.learning_rate: {low: -1, high: 1}}}}",
        "scan.space.parameters.optimizer.learning_rate.low",
        "must be > 0, got -1 (the range must lie inside the values",
    ),
    (
        "patience-above-one",
        "scan: {space: {parameters: {stopping.patience: {low: 0.5, high: 1.5}}}}",
        "scan.space.parameters.stopping.patience.high",
        "must be <= 1, got 1.5",
    ),
    (
        "range-against-base-runcard",
        "scan: {space: {parameters: {positivity.initial: {low: 1, high: 1.0e7, log: true}}}}",
        "scan.space.parameters.positivity.initial.high",
        "with positivity.initial = 10000000 the fit runcard is invalid: positivity.max: "
        "must be >= initial",
    ),
    (
        "unknown-optimizer",
        "scan: {space: {optimizer: {adamw: {}}}}",
        "scan.space.optimizer.adamw",
        "unknown key 'adamw' (did you mean 'adam'?)",
    ),
    (
        "unknown-optimizer-key",
        "scan: {space: {optimizer: {adam: {learning_rte: {low: 1, high: 2}}}}}",
        "scan.space.optimizer.adam.learning_rte",
        "did you mean 'learning_rate'?",
    ),
    ("empty-optimizer-space", "scan: {space: {optimizer: {}}}", "scan.space.optimizer", "empty"),
    (
        "units-without-layers",
        "scan: {space: {units: {low: 10, high: 45}}}",
        "scan.space.units",
        "'units' needs 'layers'",
    ),
    (
        "layers-without-units",
        "scan: {space: {layers: {low: 1, high: 3}}}",
        "scan.space.layers",
        "'layers' needs 'units'",
    ),
    (
        "too-many-layers",
        "scan: {space: {layers: {low: 1, high: 11}, units: {low: 5, high: 9}}}",
        "scan.space.layers.high",
        "must be <= 10, got 11",
    ),
    (
        "zero-units",
        "scan: {space: {layers: {low: 1, high: 3}, units: {low: 0, high: 9}}}",
        "scan.space.units.low",
        "must be >= 1, got 0",
    ),
    (
        "layers-with-mixed-base-activations",
        "architecture: {nodes: [10, 5], activations: [tanh, sigmoid]}\n"
        "scan: {space: {layers: {low: 1, high: 3}, units: {low: 1, high: 4}}}",
        "scan.space.layers",
        "give 'scan.space.activation'",
    ),
    (
        "bad-activation",
        "scan: {space: {activation: [tanh, tann]}}",
        "scan.space.activation[1]",
        "did you mean 'tanh'?",
    ),
    (
        "held-out-without-folds",
        "scan: {objective: {chi2: held_out}, space: {activation: [tanh]}}",
        "scan.objective.chi2",
        "needs 'scan.folds'",
    ),
    (
        "dataset-in-two-folds",
        "scan: {folds: [[A, B], [C, A]], space: {activation: [tanh]}}",
        "scan.folds[1][1]",
        "'A' is already in fold 0",
    ),
    (
        "dataset-twice-in-a-fold",
        "scan: {folds: [[A, A]], space: {activation: [tanh]}}",
        "scan.folds[0]",
        "'A' appears more than once",
    ),
    ("empty-fold", "scan: {folds: [[]], space: {activation: [tanh]}}", "scan.folds[0]", "empty"),
    (
        "fold-dataset-not-fitted",
        "data: {datasets: [A, B]}\nscan: {folds: [[A], [C]], space: {activation: [tanh]}}",
        "scan.folds[1][0]",
        "'C' is not among the fitted datasets",
    ),
    (
        "top-level-folds-in-a-scan",
        "folds: [[A]]\nscan: {space: {activation: [tanh]}}",
        "folds",
        "give them as 'scan.folds'",
    ),
    (
        "folds-in-parameters",
        "scan: {space: {parameters: {folds: {low: 1, high: 2}}}}",
        "scan.space.parameters.folds",
        "set by 'scan.folds'",
    ),
    ("empty-space", "scan: {space: {}}", "scan.space", "the search space is empty"),
    (
        "empty-parameters-only",
        "scan: {space: {parameters: {}}}",
        "scan.space",
        "the search space is empty",
    ),
    ("missing-space", "scan: {trials: 3}", "scan.space", "required key is missing"),
    (
        "optimizer-path-with-optimizer-space",
        "scan: {space: {optimizer: {adam: {}}, "
        "parameters: {optimizer.learning_rate: {low: 1.0e-3, high: 1.0e-2}}}}",
        "scan.space.parameters.optimizer.learning_rate",
        "is searched under 'scan.space.optimizer'",
    ),
    (
        "replicas-in-parameters",
        "scan: {space: {parameters: {replicas: {low: 1, high: 3}}}}",
        "scan.space.parameters.replicas",
        "set by 'scan.replicas'",
    ),
    (
        "datasets-in-parameters",
        "scan: {space: {parameters: {data.datasets: {choices: [all]}}}}",
        "scan.space.parameters.data.datasets",
        "use 'scan.folds'",
    ),
    (
        "closure-in-parameters",
        "scan: {space: {parameters: {data.closure.seed: {low: 0, high: 9}}}}",
        "scan.space.parameters.data.closure.seed",
        "the data are fixed for a study",
    ),
    (
        "batch-layout-in-a-scan",
        "training: {batch_layout: {slots: 2, slot: 0, widths: [25, 20], activations: [tanh],"
        " optimizers: [nadam]}}",
        "training",
        "a scan runcard has no training.batch_layout",
    ),
    (
        "threads-in-parameters",
        "scan: {space: {parameters: {training.threads: {low: 1, high: 4}}}}",
        "scan.space.parameters.training.threads",
        "a worker runs every trial with its own threads",
    ),
    (
        "steps-per-call-in-parameters",
        "scan: {space: {parameters: {training.steps_per_call: {choices: [50, 100]}}}}",
        "scan.space.parameters.training.steps_per_call",
        "it spaces the pruner's reports",
    ),
    (
        "nodes-in-parameters",
        "scan: {space: {parameters: {architecture.nodes: {choices: [10]}}}}",
        "scan.space.parameters.architecture.nodes",
        "'scan.space.layers' and 'scan.space.units'",
    ),
    (
        "section-in-parameters",
        "scan: {space: {parameters: {stopping: {low: 0.1, high: 0.3}}}}",
        "scan.space.parameters.stopping",
        "is a section; name one of its settings: stopping.patience",
    ),
    (
        "scalar-instead-of-distribution",
        "scan: {space: {parameters: {epochs: 100}}}",
        "scan.space.parameters.epochs",
        "expected a range {low, high} (with optional log, step) or {choices: [...]}",
    ),
    (
        "bound-not-a-number",
        "scan: {space: {parameters: {epochs: {low: a, high: 3}}}}",
        "scan.space.parameters.epochs.low",
        "expected a number, got the string 'a'",
    ),
    (
        "unknown-range-key",
        "scan: {space: {parameters: {epochs: {low: 1, high: 3, stpe: 1}}}}",
        "scan.space.parameters.epochs.stpe",
        "did you mean 'step'?",
    ),
    ("trials-zero", "scan: {trials: 0, space: {activation: [tanh]}}", "scan.trials", ">= 1"),
    (
        "replicas-float",
        "scan: {replicas: 2.5, space: {activation: [tanh]}}",
        "scan.replicas",
        "expected an integer",
    ),
    (
        "unknown-statistic",
        "scan: {objective: {statistic: trimmed}, space: {activation: [tanh]}}",
        "scan.objective.statistic",
        "'trimmed_mean'",
    ),
    (
        "best-fraction-zero",
        "scan: {objective: {best_fraction: 0}, space: {activation: [tanh]}}",
        "scan.objective.best_fraction",
        "must be > 0",
    ),
    (
        "negative-std-weight",
        "scan: {objective: {std_weight: -1}, space: {activation: [tanh]}}",
        "scan.objective.std_weight",
        "must be >= 0",
    ),
    (
        "unknown-sampler",
        "scan: {sampler: {name: tpee}, space: {activation: [tanh]}}",
        "scan.sampler.name",
        "did you mean 'tpe'?",
    ),
    (
        "unknown-pruner",
        "scan: {pruner: {name: hyperbnd}, space: {activation: [tanh]}}",
        "scan.pruner.name",
        "did you mean 'hyperband'?",
    ),
    (
        "report-every-zero",
        "scan: {pruner: {report_every: 0}, space: {activation: [tanh]}}",
        "scan.pruner.report_every",
        "must be >= 1",
    ),
    (
        "max-diverged-all-replicas",
        "scan: {replicas: 2, divergence: {max_diverged: 2}, space: {activation: [tanh]}}",
        "scan.divergence.max_diverged",
        "must be < 2",
    ),
    (
        "max-pos-veto-all-members",
        "scan: {replicas: 2, folds: [[a], [b]], divergence: {max_pos_veto: 4}, "
        "space: {activation: [tanh]}}",
        "scan.divergence.max_pos_veto",
        "must be < 4",
    ),
    (
        "unknown-scan-key",
        "scan: {trails: 3, space: {activation: [tanh]}}",
        "scan.trails",
        "did you mean 'trials'?",
    ),
]


@pytest.mark.parametrize(
    ("text", "key", "fragment"), [case[1:] for case in BAD], ids=[case[0] for case in BAD]
)
def test_bad_scan_is_reported(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    path = tmp_path / "scan.yml"
    path.write_text(text + "\n")
    with pytest.raises(RuncardError) as excinfo:
        load_scan_runcard(path)
    err = excinfo.value
    matching = [message for where, message in err.problems if where == key]
    assert matching, f"no problem at {key!r}: {err.problems}"
    assert any(fragment in message for message in matching), matching
    assert len(err.problems) == 1, err.problems
    text_out = str(err)
    assert text_out.startswith(f"{path}: {key}: ")
    for banned in ("pydantic", "https://", "Input should", "Traceback", "Tag", "categorical"):
        assert banned not in text_out
    assert err.__cause__ is None


def test_all_mistakes_of_a_scan_are_reported_together() -> None:
    text = """
scan:
  sampler: {name: tpee}
  pruner: {report_every: 0}
  folds: [[A, B], [B]]
  space:
    layers: {low: 3, high: 1}
    units: {low: 1, high: 4.5}
    parameters:
      epochs: {low: 1.5, high: 10}
      stoping.patience: {low: 0.1, high: 0.3}
      architecture.initializer: {choices: [glorot]}
"""
    with pytest.raises(RuncardError) as excinfo:
        parse_scan_runcard(text, source="s.yml")
    assert [key for key, _ in excinfo.value.problems] == [
        "scan.folds[1][0]",
        "scan.sampler.name",
        "scan.pruner.report_every",
        "scan.space.layers.high",
        "scan.space.units.high",
        "scan.space.parameters.epochs.low",
        "scan.space.parameters.stoping.patience",
        "scan.space.parameters.architecture.initializer.choices[0]",
    ]


def test_fit_and_scan_mistakes_are_reported_together() -> None:
    text = "epochs: 0\nscan: {trials: 0, space: {parameters: {xyz: {low: 1, high: 2}}}}\n"
    with pytest.raises(RuncardError) as excinfo:
        parse_scan_runcard(text)
    assert [key for key, _ in excinfo.value.problems] == [
        "epochs",
        "scan.trials",
        "scan.space.parameters.xyz",
    ]


def test_fit_part_mistakes_keep_their_key_paths() -> None:
    """The fit part's keys stand at the top level, so its errors name them there."""
    text = "traning: {}\ntraining: {jit: 1}\nscan: {space: {activation: [tanh]}}\n"
    with pytest.raises(RuncardError) as excinfo:
        parse_scan_runcard(text)
    problems = dict(excinfo.value.problems)
    assert list(problems) == ["training.jit", "traning"]
    assert problems["traning"].startswith("unknown key 'traning' (did you mean 'training'?)")
    assert problems["traning"].endswith(", training, folds, scan")  # the allowed keys
    assert problems["training.jit"] == "expected a boolean (true or false), got the integer 1"


def test_a_scan_runcard_is_built_from_its_parts() -> None:
    card = parse_scan_runcard(FULL)
    again = ScanRuncard(fit=card.fit, scan=card.scan)
    assert again == card and again.fit is card.fit
    assert dump_runcard(again) == dump_runcard(card)
    assert list(card.model_dump(mode="json"))[-1] == "scan"  # the fit keys, then scan


def _studies() -> list[Path]:
    return sorted(STUDIES.glob("*.yml")) + sorted(STUDIES.glob("*.yaml"))


@pytest.mark.parametrize("path", _studies(), ids=lambda p: p.name)
def test_every_study_loads(path: Path) -> None:
    runcard = load_runcard(path)
    if "scan" in path.name:
        assert isinstance(runcard, ScanRuncard)
        assert type(runcard.fit) is FitRuncard
        assert parse_scan_runcard(dump_runcard(runcard)) == runcard
    else:
        assert type(runcard) is FitRuncard


def test_quickstart_scan() -> None:
    runcard = load_scan_runcard(STUDIES / "quickstart-scan.yml")
    scan = runcard.scan
    fit = runcard.fit
    assert fit.data.closure is not None
    assert fit.data.closure.size == "small" and fit.data.closure.level == 1
    assert fit.epochs == 1000
    assert fit.training.steps_per_call == 100
    assert fit.training.precision == "float32"
    assert (scan.trials, scan.replicas, scan.folds) == (8, 2, ())
    assert scan.space.optimizer is not None
    assert sorted(scan.space.optimizer) == ["adam", "nadam"]
    for sub in scan.space.optimizer.values():
        assert sub.learning_rate == Range(low=1.0e-3, high=3.0e-2, log=True)
        assert sub.clipnorm == Range(low=1.0e-4, high=1.0e-1, log=True)
    assert scan.space.layers == Range(low=1, high=2)
    assert scan.space.units == Range(low=8, high=30)
    assert scan.space.activation == ("tanh", "sigmoid")


def test_kfold_scan() -> None:
    quick = load_scan_runcard(STUDIES / "quickstart-scan.yml")
    kfold = load_scan_runcard(STUDIES / "kfold-scan.yml")
    assert len(kfold.scan.folds) == 3
    assert kfold.scan.objective.chi2 == "held_out"
    assert kfold.scan.members == 3 * kfold.scan.replicas
    # Otherwise the same scan as the quick start, on data with a twin for every held-out
    # dataset (the medium closure test) and with fits long enough to predict them.
    assert (kfold.fit.data.closure.size, kfold.fit.epochs) == ("medium", 4000)
    expected = quick.fit.model_dump(mode="json")
    expected["data"]["closure"]["size"] = "medium"
    expected["epochs"] = 4000
    assert kfold.fit.model_dump(mode="json") == expected
    assert kfold.scan.space == quick.scan.space


def test_the_widest_trials_of_a_space_have_its_most_layers_and_units_with_each_choice() -> None:
    """One runcard per optimiser and activation, each as deep and wide as the space allows:
    the room a batch of its trials makes up front."""
    runcard = load_scan_runcard(STUDIES / "kfold-scan.yml")
    space = runcard.scan.space
    widest = space.widest(runcard.trial_base)
    pairs = {(card.optimizer.name, card.architecture.activations[0]) for card in widest}
    assert pairs == {(o, a) for o in space.optimizer for a in space.activation}
    for card in widest:
        assert list(card.architecture.nodes) == [space.units.high] * space.layers.high
        assert card.replica_ids == runcard.scan.replica_ids and card.folds == runcard.scan.folds
