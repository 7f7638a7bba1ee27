# SPDX-License-Identifier: GPL-3.0-or-later
"""Studies of real data made by hand for the n3fit commands' tests: trials drawn from the
space as a worker draws them and told a value, no fit."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import optuna
import yaml
from click.testing import CliRunner, Result

from hyperscan.cli import main
from hyperscan.runcard import load_scan_runcard
from hyperscan.scan import open_storage
from hyperscan.scan.storage import load_study

NAMES = ["HERA_NC_225GEV_EP-SIGMARED", "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA"]
REAL_SCAN: dict[str, Any] = {
    "data": {"real": {"datasets": [{"dataset": name} for name in NAMES]}},
    "architecture": {"nodes": [6], "activations": ["tanh"]},
    "optimizer": {"clipnorm": 1.0},
    "epochs": 100,
    "training": {"threads": 1},
    "scan": {
        "trials": 5,
        "replicas": 2,
        "folds": [[name] for name in NAMES],
        "space": {"optimizer": {"adam": {"learning_rate": {"low": 1e-3, "high": 1e-2}}}},
    },
}
VALUES = [0.4, 0.1, 0.3]  # trial 1 is the best


def cli(*args: Any) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def refused(result: Result) -> str:
    """Exit code 2, one `error:` line on stderr, no traceback; returns the line."""
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.output
    return result.stderr


def told_study(folder: Path, card: dict[str, Any]) -> str:
    """Study 's' of ``card`` on a journal file, a trial drawn for each of VALUES and told it."""
    url = str(folder / "scan.journal")
    path = folder / "scan.yml"
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    created = cli("study", "create", path, "--storage", url, "--name", "s")
    assert created.exit_code == 0, created.output
    space = load_scan_runcard(path).scan.space
    study = load_study(open_storage(url), "s", sampler=optuna.samplers.RandomSampler(seed=0))
    with warnings.catch_warnings():  # trials asked for by hand: no heartbeat
        warnings.simplefilter("ignore", UserWarning)
        for value in VALUES:
            trial = study.ask()
            space.suggest(trial)
            study.tell(trial, value)
    return url


def export(url: str, out: Path, *args: Any) -> Result:
    return cli("export", "--study", "s", "--storage", url, "-o", out, *args)
