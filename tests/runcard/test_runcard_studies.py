# SPDX-License-Identifier: GPL-3.0-or-later
"""Every fit runcard shipped in studies/ must load (scan runcards are checked elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hyperscan.runcard import load_fit_runcard

STUDIES = Path(__file__).resolve().parents[2] / "studies"


def _fit_runcards() -> list[Path]:
    files = sorted(STUDIES.glob("*.yml")) + sorted(STUDIES.glob("*.yaml"))
    return [f for f in files if "scan" not in (yaml.safe_load(f.read_text()) or {})]


def test_there_is_a_fit_runcard() -> None:
    assert STUDIES.joinpath("quickstart-fit.yml") in _fit_runcards()


@pytest.mark.parametrize("path", _fit_runcards(), ids=lambda p: p.name)
def test_study_fit_runcard_loads(path: Path) -> None:
    load_fit_runcard(path)


def test_quickstart_values() -> None:
    runcard = load_fit_runcard(STUDIES / "quickstart-fit.yml")
    assert runcard.data.closure.size == "small"
    assert runcard.data.closure.level == 1
    assert runcard.replica_ids == (1, 2, 3, 4)
    assert runcard.epochs == 2000
    assert runcard.architecture.nodes == (25, 20)
    assert runcard.optimizer.name == "nadam"
    assert runcard.optimizer.learning_rate == 5.0e-3
