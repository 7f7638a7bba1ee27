# SPDX-License-Identifier: GPL-3.0-or-later
"""Mistakes in runcards: each is reported at its key path with a message a person can act on."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from hyperscan.runcard import (
    RuncardError,
    load_fit_runcard,
    parse_fit_runcard,
    runcard_from_dict,
)

# (id, runcard text, expected key path, fragment of the message)
MISTAKES = [
    ("empty-file", "", "", "empty"),
    ("comments-only", "# nothing here\n", "", "empty"),
    ("yaml-syntax", "epochs: 100\noptimizer:\n  name: [nadam\n  clipnorm: 1\n", "", "line 4"),
    ("yaml-bad-indent", "data:\n  datasets: all\n   pseudodata: true\n", "", "line 3, column"),
    ("top-level-list", "- epochs\n- 100\n", "", "top level, got a list"),
    ("top-level-scalar", "17000\n", "", "top level, got the integer 17000"),
    ("multiple-documents", "epochs: 1\n---\nepochs: 2\n", "", "single document"),
    ("nested-too-deeply", "epochs: " + "[" * 2000 + "]" * 2000 + "\n", "", "nested too deeply"),
    ("integer-too-long", "epochs: 1" + "0" * 5000 + "\n", "", "line 1, column 9: an integer"),
    ("explicit-hex-integer", "epochs: !!int 0x10\n", "", "'0x10' is not a decimal integer"),
    (
        "sexagesimal-float",
        "optimizer: {learning_rate: 1:30.5}\n",
        "optimizer.learning_rate",
        "string",
    ),
    ("duplicate-key", "epochs: 100\nreplicas: 2\nepochs: 200\n", "epochs", "lines 1 and 3"),
    ("duplicate-nested-key", "optimizer: {name: adam, name: sgd}\n", "optimizer.name", "duplicate"),
    ("unknown-top-key", "epoch: 100\n", "epoch", "did you mean 'epochs'?"),
    ("unknown-key-lists-allowed", "epoch: 100\n", "epoch", "allowed keys: data, replicas"),
    (
        "unknown-nested-key",
        "optimizer:\n  learning_rte: 1.0e-3\n",
        "optimizer.learning_rte",
        "unknown key 'learning_rte' (did you mean 'learning_rate'?)",
    ),
    ("unknown-deep-key", "data: {closure: {sise: tiny}}\n", "data.closure.sise", "'size'"),
    (
        "unknown-flavour",
        "preprocessing:\n  Sigm: {alpha: [1, 1.1]}\n",
        "preprocessing.Sigm",
        "'Sigma'",
    ),
    ("string-for-int", "epochs: '100'\n", "epochs", "expected an integer, got the string '100'"),
    ("float-for-int", "epochs: 1.5e4\n", "epochs", "expected an integer, got the number 15000.0"),
    (
        "bool-for-int",
        "training: {steps_per_call: true}\n",
        "training.steps_per_call",
        "boolean true",
    ),
    ("bool-for-float", "optimizer: {learning_rate: true}\n", "optimizer.learning_rate", "a number"),
    ("int-for-bool", "training: {jit: 1}\n", "training.jit", "expected a boolean"),
    ("null-section", "stopping:\n", "stopping", "expected a mapping, got null"),
    # sizes a slip of the keyboard makes absurd: a message, not an endless allocation
    ("huge-replicas", "replicas: 99999999999999999999\n", "replicas", "must be <= 10000"),
    ("huge-replica-id", "replicas: [1, 4294967296]\n", "replicas[1]", "<= 4294967295"),
    ("huge-layer", "architecture: {nodes: [100000]}\n", "architecture.nodes[0]", "<= 10000"),
    ("huge-epochs", "epochs: 99999999999999999999\n", "epochs", "must be <= 1000000000"),
    ("huge-threads", "training: {threads: 100000}\n", "training.threads", "must be <= 1024"),
    # a batch layout (written by `export`) the trial could not have been fitted in
    (
        "layout-slot-outside",
        "training: {batch_layout: {slots: 2, slot: 2, widths: [25, 20], activations: [tanh],"
        " optimizers: [nadam]}}\n",
        "training.batch_layout.slot",
        "slot 2 is not one of the batch's 2 (0 to 1)",
    ),
    (
        "layout-too-narrow",
        "training: {batch_layout: {slots: 2, slot: 0, widths: [25, 8], activations: [tanh],"
        " optimizers: [nadam]}}\n",
        "training.batch_layout.widths",
        "[25, 8] cannot hold architecture.nodes [25, 20]",
    ),
    (
        "layout-without-the-activation",
        "training: {batch_layout: {slots: 2, slot: 0, widths: [25, 20], activations: [elu],"
        " optimizers: [nadam]}}\n",
        "training.batch_layout.activations",
        "lacks the architecture's ['tanh']",
    ),
    (
        "layout-without-the-optimizer",
        "training: {batch_layout: {slots: 2, slot: 0, widths: [25, 20], activations: [tanh],"
        " optimizers: [adam]}}\n",
        "training.batch_layout.optimizers",
        "lacks optimizer.name 'nadam'",
    ),
    # values the device's precision cannot hold: a message, not a fit that diverges at step 1
    (
        "float32-overflow",
        "optimizer: {learning_rate: 1.0e+39}\n",
        "optimizer.learning_rate",
        "beyond float32's range (training.precision): at most 3.4e+38",
    ),
    (
        "float32-underflow",
        "optimizer: {clipnorm: 1.0e-40}\n",
        "optimizer.clipnorm",
        "below float32's range",
    ),
    (
        "lambda-outgrows-float32",
        "epochs: 17000\npositivity: {multiplier: 2}\n",
        "positivity.multiplier",
        "lambda would grow to ~1e53 in 170 updates",
    ),
    (
        "negative-learning-rate",
        "optimizer: {learning_rate: -1e-3}\n",
        "optimizer.learning_rate",
        "must be > 0, got -0.001",
    ),
    ("infinite-clipnorm", "optimizer: {clipnorm: .inf}\n", "optimizer.clipnorm", "finite"),
    (
        "bad-optimizer",
        "optimizer: {name: adamw}\n",
        "optimizer.name",
        "'adam', 'nadam', 'amsgrad', 'rmsprop', 'adadelta', 'sgd'",
    ),
    (
        "bad-activation",
        "architecture: {activations: [tanh, tan]}\n",
        "architecture.activations[1]",
        "did you mean 'tanh'?",
    ),
    (
        "bad-precision",
        "training: {precision: float16}\n",
        "training.precision",
        "'float32', 'float64'",
    ),
    ("bad-closure-size", "data: {closure: {size: huge}}\n", "data.closure.size", "'nnpdf40'"),
    (
        "activations-length",
        "architecture: {nodes: [25, 20], activations: [tanh]}\n",
        "architecture.activations",
        "'nodes' has 2 layer(s) but 'activations' has 1",
    ),
    (
        "zero-nodes",
        "architecture: {nodes: [25, 0]}\n",
        "architecture.nodes[1]",
        "must be >= 1, got 0",
    ),
    ("no-layers", "architecture: {nodes: []}\n", "architecture.nodes", "must not be empty"),
    (
        "too-many-layers",
        f"architecture: {{nodes: {[5] * 11}}}\n",
        "architecture.nodes",
        "at most 10",
    ),
    (
        "alpha-reversed",
        "preprocessing: {g: {alpha: [1.1, 0.7]}}\n",
        "preprocessing.g.alpha",
        "lo <= hi",
    ),
    (
        "alpha-too-large",
        "preprocessing: {V: {alpha: [0.5, 2.5]}}\n",
        "preprocessing.V.alpha[1]",
        "must be < 2",
    ),
    (
        "beta-one-bound",
        "preprocessing: {V: {beta: [3]}}\n",
        "preprocessing.V.beta",
        "two bounds [lo, hi], got 1 entry",
    ),
    ("replicas-duplicates", "replicas: [1, 2, 2]\n", "replicas", "2 appears more than once"),
    ("replicas-zero", "replicas: 0\n", "replicas", "must be >= 1, got 0"),
    ("replicas-zero-id", "replicas: [1, 0]\n", "replicas[1]", "must be >= 1"),
    ("replicas-empty", "replicas: []\n", "replicas", "must not be empty"),
    # pydantic would add "must not be empty": it counts entries after validation.
    ("replicas-only-bad-id", "replicas: [0]\n", "replicas[0]", "must be >= 1, got 0"),
    (
        "replicas-string",
        "replicas: '4'\n",
        "replicas",
        "or a non-empty list of distinct replica ids",
    ),
    ("replicas-bool", "replicas: true\n", "replicas", "got the boolean true"),
    (
        "datasets-string",
        "data: {datasets: NMC}\n",
        "data.datasets",
        "expected 'all' or a non-empty list",
    ),
    (
        "datasets-duplicates",
        "data: {datasets: [NMC, NMC]}\n",
        "data.datasets",
        "'NMC' appears more than once",
    ),
    (
        "datasets-not-string",
        "data: {datasets: [NMC, 3]}\n",
        "data.datasets[1]",
        "expected a string, got the integer 3",
    ),
    (
        "training-fraction-zero",
        "data: {training_fraction: 0}\n",
        "data.training_fraction",
        "must be > 0, got 0",
    ),
    (
        "training-fraction-above-one",
        "data: {training_fraction: 1.5}\n",
        "data.training_fraction",
        "must be <= 1",
    ),
    ("level-two", "data: {closure: {level: 2}}\n", "data.closure.level", "must be <= 1, got 2"),
    ("negative-seed", "seeds: {network: -1}\n", "seeds.network", "must be >= 0"),
    ("epochs-zero", "epochs: 0\n", "epochs", "must be >= 1, got 0"),
    ("patience-zero", "stopping: {patience: 0}\n", "stopping.patience", "must be > 0"),
    ("positivity-both", "positivity: {max: 1.0e6, multiplier: 1.1}\n", "positivity", "not both"),
    (
        "positivity-neither",
        "positivity: {max: null}\n",
        "positivity",
        "set one of 'max' or 'multiplier'",
    ),
    (
        "positivity-max-below-initial",
        "positivity: {initial: 100, max: 10}\n",
        "positivity.max",
        ">= initial (100), got 10",
    ),
    (
        "positivity-multiplier-one",
        "positivity: {multiplier: 1}\n",
        "positivity.multiplier",
        "must be > 1",
    ),
    ("non-string-key", "1: 2\n", "1", "keys must be strings"),
    ("dataset-in-two-folds", "folds: [[A, B], [C, A]]\n", "folds[1][1]", "already in fold 0"),
    ("empty-fold", "folds: [[]]\n", "folds[0]", "empty"),
    (
        "fold-dataset-not-fitted",
        "data: {datasets: [A, B]}\nfolds: [[A], [C]]\n",
        "folds[1][0]",
        "'C' is not among the fitted datasets",
    ),
]


@pytest.mark.parametrize(
    ("text", "key", "fragment"), [case[1:] for case in MISTAKES], ids=[case[0] for case in MISTAKES]
)
def test_mistake_is_reported(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    path = tmp_path / "runcard.yml"
    path.write_text(text)
    with pytest.raises(RuncardError) as excinfo:
        load_fit_runcard(path)
    err = excinfo.value
    assert err.path == str(path)
    matching = [message for where, message in err.problems if where == key]
    assert matching, f"no problem at {key!r}: {err.problems}"
    assert any(fragment in message for message in matching), matching
    assert len(err.problems) == 1, err.problems
    # For humans: file and key on every line, no pydantic jargon, no traceback.
    text_out = str(err)
    prefix = f"{path}: {key}: " if key else f"{path}: "
    assert text_out.startswith(prefix)
    for banned in ("pydantic", "https://", "Input should", "Traceback", "literal[", "list[int]"):
        assert banned not in text_out
    assert err.__cause__ is None


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yml"
    with pytest.raises(RuncardError) as excinfo:
        load_fit_runcard(path)
    assert excinfo.value.problems == [("", "file not found")]
    assert str(excinfo.value) == f"{path}: file not found"


def test_directory_is_not_a_runcard(tmp_path: Path) -> None:
    with pytest.raises(RuncardError) as excinfo:
        load_fit_runcard(tmp_path)
    assert "is a directory" in str(excinfo.value)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yml"
    path.write_bytes("data: {datasets: [Höhe]}\n".encode("latin-1"))
    with pytest.raises(RuncardError) as excinfo:
        load_fit_runcard(path)
    assert "not UTF-8" in str(excinfo.value)


def test_dict_must_be_a_mapping() -> None:
    with pytest.raises(RuncardError) as excinfo:
        runcard_from_dict([1, 2])  # type: ignore[arg-type]
    assert str(excinfo.value) == (
        "<dict>: expected a mapping of runcard sections at the top level, got a list"
    )


def test_all_mistakes_in_one_file_are_reported() -> None:
    text = """
optimizer:
  name: adamw
  learning_rte: 1.0e-3
epochs: "100"
replicas: [1, 1]
architecture: {nodes: [10, 0]}
data: {training_fraction: 0}
preprocessing: {g: {alpha: [1.2, 1.1]}}
training: {precision: float16}
"""
    with pytest.raises(RuncardError) as excinfo:
        parse_fit_runcard(text, source="scan.yml")
    err = excinfo.value
    assert err.path is None
    assert [key for key, _ in err.problems] == [
        "data.training_fraction",
        "replicas",
        "architecture.nodes[1]",
        "optimizer.name",
        "optimizer.learning_rte",
        "epochs",
        "preprocessing.g.alpha",
        "training.precision",
    ]
    lines = str(err).splitlines()
    assert len(lines) == len(err.problems)
    assert all(line.startswith("scan.yml: ") for line in lines)


def test_errors_under_an_unknown_key_are_not_reported() -> None:
    with pytest.raises(RuncardError) as excinfo:
        parse_fit_runcard("preprocessing: {sigma: {alpha: [5, 1]}}\n")
    assert [key for key, _ in excinfo.value.problems] == ["preprocessing.sigma"]


def test_error_survives_pickling() -> None:
    with pytest.raises(RuncardError) as excinfo:
        parse_fit_runcard("epochs: 0\n", source="a.yml")
    copy = pickle.loads(pickle.dumps(excinfo.value))
    assert copy.problems == excinfo.value.problems
    assert str(copy) == str(excinfo.value)
