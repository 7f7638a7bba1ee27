# SPDX-License-Identifier: GPL-3.0-or-later
"""Studies built in a second, without fitting: trials made with optuna.trial.create_trial that
carry the parameters and user attributes a hyperscan worker stores."""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import optuna  # noqa: E402
import yaml  # noqa: E402
from optuna.distributions import (  # noqa: E402
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState  # noqa: E402

from hyperscan.runcard import load_scan_runcard, scan_runcard_from_dict  # noqa: E402
from hyperscan.scan import open_storage  # noqa: E402
from hyperscan.scan._study import create_study  # noqa: E402
from hyperscan.score._statistics import summary  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "studies" / "quickstart-scan.yml"
WORKERS = ("node-a:4101", "node-b:4202")
# A scan that started 12 minutes ago and is still running.
START = datetime.datetime.now().replace(microsecond=0) - datetime.timedelta(minutes=12)


def _distributions(optimizer: str, layers: int) -> dict:
    """The distributions of studies/quickstart-scan.yml's space (what suggest() draws)."""
    dists = {
        "optimizer": CategoricalDistribution(["adam", "nadam"]),
        f"{optimizer}.learning_rate": FloatDistribution(1e-3, 3e-2, log=True),
        f"{optimizer}.clipnorm": FloatDistribution(1e-4, 1e-1, log=True),
        "layers": IntDistribution(1, 2),
        "activation": CategoricalDistribution(["tanh", "sigmoid"]),
    }
    for k in range(1, layers + 1):
        dists[f"units_{k}"] = IntDistribution(8, 30)
    return dists


def _trial(
    number: int, rng: np.random.Generator, state: TrialState, card
) -> optuna.trial.FrozenTrial:
    optimizer = ("adam", "nadam")[int(rng.integers(2))]
    layers = int(rng.integers(1, 3))
    lr = float(np.exp(rng.uniform(np.log(1e-3), np.log(3e-2))))
    params = {
        "optimizer": optimizer,
        f"{optimizer}.learning_rate": lr,
        f"{optimizer}.clipnorm": float(np.exp(rng.uniform(np.log(1e-4), np.log(1e-1)))),
        "layers": layers,
        **{f"units_{k}": int(rng.integers(8, 31)) for k in range(1, layers + 1)},
        "activation": ("tanh", "sigmoid")[int(rng.integers(2))],
    }
    # A landscape with structure: a best learning rate, sigmoid worse, noise.
    centre = 1.3 + 4.0 * (np.log10(lr) + 2.0) ** 2 + 0.6 * (params["activation"] == "sigmoid")
    replicas = card.scan.replicas
    validation = centre * np.exp(rng.normal(0.0, 0.15, replicas))
    training = validation * 0.8
    user_attrs = {
        "worker": WORKERS[number % 2],
        "statistics": {
            "mean": round(float(np.mean(validation)), 6),
            "median": round(float(np.median(validation)), 6),
            "max": round(float(np.max(validation)), 6),
        },
        "replicas": {
            "training": summary(training),
            "validation": summary(validation),
            "held_out": summary(np.full(replicas, np.nan)),
            "experimental": summary(training * 1.05),
        },
        "fit": {
            "members": replicas,
            "diverged": 0,
            "pos_veto": 0,
            "best_epoch": summary(rng.integers(300, 1000, replicas).astype(float)),
            "steps": 1000,
            "seconds": round(float(rng.uniform(20, 80)), 2),
            "host": WORKERS[number % 2].split(":")[0],
            "threads": 1,
            "hyperscan": "0.1.0",
        },
    }
    value = None
    intermediate = {}
    if state == TrialState.COMPLETE:
        value = float(np.mean(validation))
    elif state == TrialState.PRUNED and number % 3 == 0:  # trashed: a diverged replica
        user_attrs["trashed"] = (
            f"1 diverged: replica 2 at epoch {100 * (number % 7 + 2)}: non-finite loss"
        )
        user_attrs["fit"]["diverged"] = 1
        user_attrs["replicas"]["validation"] = summary(np.array([validation[0], np.nan]))
    elif state == TrialState.PRUNED:  # stopped by the median pruner
        intermediate = {200: float(centre * 3), 400: float(centre * 2)}
    trial = optuna.trial.create_trial(
        state=state,
        value=value,
        params=params,
        distributions=_distributions(optimizer, layers),
        user_attrs=user_attrs,
        intermediate_values=intermediate,
    )
    # Two workers taking turns, a trial every ~40 s each; a running trial has no end.
    trial.datetime_start = START + datetime.timedelta(seconds=20 * number)
    trial.datetime_complete = (
        None
        if state == TrialState.RUNNING
        else trial.datetime_start + datetime.timedelta(seconds=float(rng.uniform(25, 40)))
    )
    return trial


def build_study(
    path: Path,
    name: str,
    states: list[TrialState],
    seed: int = 0,
    fits: Mapping[int, Mapping[str, Any]] | None = None,
) -> str:
    """A journal storage at ``path`` with a real study (quickstart runcard) and ``states``
    trials, ``fits[number]`` updating that trial's ``fit`` attribute (a pos-veto member, say);
    returns the storage URL."""
    card = load_scan_runcard(QUICKSTART)
    storage = open_storage(str(path), create=True)
    study, _ = create_study(card, storage, name, source=str(QUICKSTART))
    rng = np.random.default_rng(seed)
    for number, state in enumerate(states):
        trial = _trial(number, rng, state, card)
        trial.user_attrs["fit"].update((fits or {}).get(number, {}))
        study.add_trial(trial)
    return str(path)


#: Two objectives of the quickstart scan that pull apart: the worst replica maximised, the mean
#: minimised.
TWO_OBJECTIVES = [
    {"name": "worst", "statistic": "max", "direction": "maximize"},
    {"name": "mean", "statistic": "mean"},
]


def build_multi_study(path: Path, name: str, values: list[tuple[float, float]]) -> str:
    """A journal storage at ``path`` with a multi-objective study (the quickstart runcard with
    ``TWO_OBJECTIVES``, no pruner) and a complete trial of each of ``values``; returns the
    storage URL."""
    data = yaml.safe_load(QUICKSTART.read_text(encoding="utf-8"))
    data["scan"]["objective"] = {"objectives": TWO_OBJECTIVES}
    del data["scan"]["pruner"]
    card = scan_runcard_from_dict(data)
    storage = open_storage(str(path), create=True)
    study, _ = create_study(card, storage, name, source=str(QUICKSTART))
    rng = np.random.default_rng(0)
    for number, pair in enumerate(values):
        trial = _trial(number, rng, TrialState.COMPLETE, card)
        trial.values = list(pair)
        study.add_trial(trial)
    return str(path)


def mixed_states(n: int = 30) -> list[TrialState]:
    """Mostly complete; pruned ones of which a third trashed; one failed; one running."""
    states = []
    for number in range(n):
        if number == n - 1:
            states.append(TrialState.RUNNING)
        elif number == 7:
            states.append(TrialState.FAIL)
        elif number % 5 == 3:
            states.append(TrialState.PRUNED)
        else:
            states.append(TrialState.COMPLETE)
    return states
