from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

from hyperscan.runcard import runcard_from_dict  # noqa: E402

TINY_FIT = {
    "data": {"closure": {"size": "tiny", "level": 1, "seed": 3}, "training_fraction": 0.75},
    "replicas": [1, 2, 3],
    "architecture": {"nodes": [10, 8], "activations": ["tanh", "tanh"]},
    "optimizer": {"name": "nadam", "learning_rate": 0.02, "clipnorm": 0.5},
    "epochs": 60,
    "stopping": {"patience": 0.1, "threshold_chi2": 50.0},
    "training": {"steps_per_call": 30, "precision": "float64"},
}


@pytest.fixture(scope="session")
def fit_folder(tmp_path_factory: pytest.TempPathFactory):
    """A fit folder of 3 replicas as `hyperscan fit` writes it (exportgrids included)."""
    from hyperscan.fit import run_fit, write_fit

    card = runcard_from_dict(TINY_FIT)
    folder = tmp_path_factory.mktemp("fits") / "tiny"
    write_fit(run_fit(card), "epochs: 60\n", folder, runcard=card)
    return folder
