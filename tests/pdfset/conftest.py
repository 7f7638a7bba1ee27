from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
from _cards import tiny_card  # noqa: E402


@pytest.fixture(scope="session")
def fit_folder(tmp_path_factory: pytest.TempPathFactory):
    """A fit folder of 3 replicas as `hyperscan fit` writes it (exportgrids included)."""
    from hyperscan.fit import run_fit, write_fit

    card = tiny_card(epochs=60, training={"steps_per_call": 30, "precision": "float64"})
    folder = tmp_path_factory.mktemp("fits") / "tiny"
    write_fit(run_fit(card), "epochs: 60\n", folder, runcard=card)
    return folder
