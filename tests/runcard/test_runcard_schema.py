# SPDX-License-Identifier: GPL-3.0-or-later
"""Valid runcards: defaults, explicit values, YAML 1.2 floats, dumping and reloading."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pydantic
import pytest
import yaml

from hyperscan.runcard import (
    FLAVOURS,
    FitRuncard,
    dump_runcard,
    load_fit_runcard,
    parse_fit_runcard,
    runcard_from_dict,
)

REPO = Path(__file__).resolve().parents[2]

NNPDF40_PREPROCESSING = {
    "Sigma": ((1.089, 1.119), (1.475, 3.119)),
    "g": ((0.7504, 1.098), (2.814, 5.669)),
    "V": ((0.479, 0.7384), (1.549, 3.532)),
    "V3": ((0.1073, 0.4397), (1.733, 3.458)),
    "V8": ((0.5507, 0.7837), (1.516, 3.356)),
    "T3": ((-0.4506, 0.9305), (1.745, 3.424)),
    "T8": ((0.5877, 0.8687), (1.522, 3.515)),
    "T15": ((1.089, 1.141), (1.492, 3.222)),
}

# Every key, none at its default value.
FULL = """
data:
  closure: {size: medium, level: 0, seed: 11}
  datasets: [NMC, SLAC_P, BCDMS_P]
  training_fraction: 0.5
  pseudodata: false
replicas: [3, 7, 12]
seeds: {data: 4, split: 5, network: 6}
architecture:
  nodes: [30, 20, 10]
  activations: [sigmoid, relu, elu]
  initializer: he_uniform
optimizer:
  name: amsgrad
  learning_rate: 1e-3
  clipnorm: null
epochs: 30000
stopping:
  patience: 0.3
  threshold_chi2: 5
  positivity_threshold: 0
positivity:
  initial: 10
  multiplier: 1.05
preprocessing:
  g: {alpha: [0.5, 1.5], beta: [2, 6]}
  T15: {beta: [1.0, 4.0]}
divergence:
  max_loss: 1.0e8
training:
  steps_per_call: 50
  precision: float64
  jit: false
"""


def test_empty_mapping_gives_nnpdf40_defaults() -> None:
    runcard = runcard_from_dict({})
    assert runcard == parse_fit_runcard("{}")
    assert runcard.data.closure.size == "small"
    assert runcard.data.closure.level == 1
    assert runcard.data.closure.seed == 0
    assert runcard.data.datasets == "all"
    assert runcard.data.training_fraction == 0.75
    assert runcard.data.pseudodata is True
    assert runcard.replicas == 1
    assert runcard.replica_ids == (1,)
    assert (runcard.seeds.data, runcard.seeds.split, runcard.seeds.network) == (1, 2, 3)
    assert runcard.architecture.nodes == (25, 20)
    assert runcard.architecture.activations == ("tanh", "tanh")
    assert runcard.architecture.initializer == "glorot_normal"
    assert runcard.optimizer.name == "nadam"
    assert runcard.optimizer.learning_rate == 2.621e-3
    assert runcard.optimizer.clipnorm == 6.073e-6
    assert runcard.epochs == 17000
    assert runcard.stopping.patience == 0.1
    assert runcard.stopping.threshold_chi2 == 3.5
    assert runcard.stopping.positivity_threshold == 1e-6
    assert runcard.positivity.initial == 184.8
    assert runcard.positivity.max == 1e6
    assert runcard.positivity.multiplier is None
    assert list(runcard.preprocessing) == list(FLAVOURS)
    for flavour, (alpha, beta) in NNPDF40_PREPROCESSING.items():
        assert runcard.preprocessing[flavour].alpha == alpha
        assert runcard.preprocessing[flavour].beta == beta
    assert runcard.divergence.max_loss == 1e10
    assert runcard.training.steps_per_call == 100
    assert runcard.training.precision == "float32"
    assert runcard.training.jit is True


def test_full_runcard_loads(tmp_path: Path) -> None:
    path = tmp_path / "full.yml"
    path.write_text(FULL)
    runcard = load_fit_runcard(path)
    assert runcard.data.closure.size == "medium"
    assert runcard.data.closure.level == 0
    assert runcard.data.closure.seed == 11
    assert runcard.data.datasets == ("NMC", "SLAC_P", "BCDMS_P")
    assert runcard.data.training_fraction == 0.5
    assert runcard.data.pseudodata is False
    assert runcard.replica_ids == (3, 7, 12)
    assert (runcard.seeds.data, runcard.seeds.split, runcard.seeds.network) == (4, 5, 6)
    assert runcard.architecture.nodes == (30, 20, 10)
    assert runcard.architecture.activations == ("sigmoid", "relu", "elu")
    assert runcard.architecture.initializer == "he_uniform"
    assert runcard.optimizer.name == "amsgrad"
    assert runcard.optimizer.learning_rate == 1e-3
    assert runcard.optimizer.clipnorm is None
    assert runcard.epochs == 30000
    assert runcard.stopping.patience == 0.3
    assert runcard.stopping.threshold_chi2 == 5.0
    assert isinstance(runcard.stopping.threshold_chi2, float)
    assert runcard.stopping.positivity_threshold == 0.0
    assert runcard.positivity.initial == 10.0
    assert runcard.positivity.max is None  # cleared because only multiplier was written
    assert runcard.positivity.multiplier == 1.05
    assert runcard.preprocessing["g"].alpha == (0.5, 1.5)
    assert runcard.preprocessing["g"].beta == (2.0, 6.0)
    # A flavour given partly keeps its default for the rest; the others keep theirs.
    assert runcard.preprocessing["T15"].alpha == NNPDF40_PREPROCESSING["T15"][0]
    assert runcard.preprocessing["T15"].beta == (1.0, 4.0)
    assert runcard.preprocessing["Sigma"].alpha == NNPDF40_PREPROCESSING["Sigma"][0]
    assert list(runcard.preprocessing) == list(FLAVOURS)
    assert runcard.divergence.max_loss == 1e8
    assert runcard.training.steps_per_call == 50
    assert runcard.training.precision == "float64"
    assert runcard.training.jit is False


def test_replica_count_means_ids_one_to_n() -> None:
    assert runcard_from_dict({"replicas": 4}).replica_ids == (1, 2, 3, 4)
    assert runcard_from_dict({"replicas": [7, 3]}).replica_ids == (7, 3)


def test_activations_default_to_tanh_per_layer() -> None:
    runcard = runcard_from_dict({"architecture": {"nodes": [10, 10, 10]}})
    assert runcard.architecture.activations == ("tanh", "tanh", "tanh")


@pytest.mark.parametrize(
    ("written", "value"),
    [("1e-6", 1e-6), ("1.0e6", 1e6), (".5", 0.5), ("3E+2", 300.0), ("+2.5e-3", 2.5e-3)],
)
def test_yaml12_floats_load_as_floats(written: str, value: float) -> None:
    runcard = parse_fit_runcard(f"optimizer:\n  learning_rate: {written}\n")
    assert isinstance(runcard.optimizer.learning_rate, float)
    assert runcard.optimizer.learning_rate == value


def test_yaml12_negative_exponent_and_infinity_are_numbers() -> None:
    # Read as strings, these would be reported as "expected a number, got the string ...".
    from hyperscan.runcard import RuncardError

    with pytest.raises(RuncardError) as excinfo:
        parse_fit_runcard("optimizer: {learning_rate: -3E+2}\ndivergence: {max_loss: .inf}\n")
    assert excinfo.value.problems == [
        ("optimizer.learning_rate", "must be > 0, got -300"),
        ("divergence.max_loss", "must be a finite number, got inf"),
    ]


@pytest.mark.parametrize(("written", "value"), [("010", 10), ("1_000", 1000), ("+7", 7)])
def test_yaml12_integers_are_decimal(written: str, value: int) -> None:
    # YAML 1.1 reads 010 as the octal 8: a replica or seed no one meant.
    assert parse_fit_runcard(f"epochs: {written}\n").epochs == value


@pytest.mark.parametrize("written", ["1:30", "0x10", "0o10", "0b11"])
def test_yaml11_integer_forms_are_strings(written: str) -> None:
    from hyperscan.runcard import RuncardError

    with pytest.raises(RuncardError) as excinfo:
        parse_fit_runcard(f"epochs: {written}\n")
    assert excinfo.value.problems == [
        ("epochs", f"expected an integer, got the string '{written}'")
    ]


def test_dump_quotes_strings_that_look_like_integers() -> None:
    runcard = runcard_from_dict({"data": {"datasets": ["010", "1_2", "NMC"]}})
    assert parse_fit_runcard(dump_runcard(runcard)) == runcard


def test_plain_pyyaml_is_not_changed() -> None:
    parse_fit_runcard("{}")
    assert yaml.safe_load("x: 1e-6") == {"x": "1e-6"}


@pytest.mark.parametrize("text", ["{}", FULL])
def test_dump_round_trips(text: str) -> None:
    runcard = parse_fit_runcard(text)
    dumped = dump_runcard(runcard)
    assert parse_fit_runcard(dumped) == runcard
    # Schema order, not alphabetical.
    assert list(yaml.safe_load(dumped)) == list(FitRuncard.model_fields)


def test_dump_quotes_strings_that_look_like_floats() -> None:
    runcard = runcard_from_dict({"data": {"datasets": ["1e5", ".5", "true", "NMC"]}})
    assert parse_fit_runcard(dump_runcard(runcard)) == runcard


def test_dump_header_becomes_comments() -> None:
    runcard = runcard_from_dict({"epochs": 123})
    dumped = dump_runcard(runcard, header="hyperscan fit\n\ntrial 7")
    assert dumped.startswith("# hyperscan fit\n#\n# trial 7\n")
    assert parse_fit_runcard(dumped) == runcard
    assert not dump_runcard(runcard).startswith("#")


def test_runcard_is_frozen_and_hashable() -> None:
    runcard = runcard_from_dict({"epochs": 5})
    with pytest.raises(pydantic.ValidationError):
        runcard.epochs = 6  # type: ignore[misc]
    assert hash(runcard) == hash(runcard_from_dict({"epochs": 5}))
    assert runcard != runcard_from_dict({"epochs": 6})


def test_subclass_adds_a_section() -> None:
    class ScanRuncard(FitRuncard):
        scan: dict[str, int] = pydantic.Field(default_factory=dict)

    runcard = ScanRuncard.model_validate({"epochs": 10, "scan": {"trials": 3}})
    assert runcard.epochs == 10
    assert list(yaml.safe_load(dump_runcard(runcard)))[-1] == "scan"
    assert hash(runcard) == hash(ScanRuncard.model_validate({"epochs": 10, "scan": {"trials": 3}}))


def test_imports_nothing_heavy_nor_other_hyperscan_packages() -> None:
    code = (
        "import sys, hyperscan.runcard\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'tensorflow')"
        " or (m.startswith('hyperscan.') and not m.startswith('hyperscan.runcard')))\n"
        "print(bad)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout.strip() == "[]"


def test_a_float64_fit_holds_what_float32_cannot():
    """The range check follows training.precision: float64 takes what float32 refuses."""
    card = {
        "epochs": 17000,
        "optimizer": {"learning_rate": 1.0e39},
        "positivity": {"multiplier": 2},
        "training": {"precision": "float64"},
    }
    runcard = runcard_from_dict(card)
    assert runcard.optimizer.learning_rate == 1.0e39 and runcard.positivity.multiplier == 2
