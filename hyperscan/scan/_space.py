# SPDX-License-Identifier: GPL-3.0-or-later
"""Search space -> Optuna parameters -> the fixed fit runcard of a trial.

Parameter names are flat and stable, because they are what Optuna stores and what the sampler
learns from: ``optimizer``; ``<optimizer>.learning_rate`` and ``<optimizer>.clipnorm`` (the
optimiser in the name keeps one distribution per optimiser, so TPE does not mix Adam's learning
rates with SGD's); ``layers`` and ``units_1`` .. ``units_<layers>``; ``activation``; and each
dotted path of ``scan.space.parameters`` as itself.

:func:`fixed_runcard` needs only the parameters a trial stored, so a finished trial is exported
without suggesting anything again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

from hyperscan.runcard import (
    Choices,
    FitRuncard,
    Range,
    ScanRuncard,
    ScanSection,
    dump_runcard,
    fit_part,
    runcard_from_dict,
    with_settings,
)

__all__ = ["OPTIMIZER_KEYS", "NotInSpace", "export_text", "fixed_runcard", "suggest"]


class NotInSpace(ValueError):
    """A trial's parameters are not a point of the runcard's space: another study's trial, or
    one ended outside a worker before it drew its values."""


#: Settings of an optimiser sub-space, each an Optuna parameter ``<optimizer>.<key>``.
OPTIMIZER_KEYS: tuple[str, ...] = ("learning_rate", "clipnorm")


def _draw(trial: optuna.trial.BaseTrial, name: str, dist: Range | Choices) -> Any:
    if isinstance(dist, Choices):
        return trial.suggest_categorical(name, list(dist.choices))
    if dist.is_int:
        step = 1 if dist.step is None else int(dist.step)
        return trial.suggest_int(name, int(dist.low), int(dist.high), step=step, log=dist.log)
    return trial.suggest_float(name, dist.low, dist.high, step=dist.step, log=dist.log)


def suggest(trial: optuna.trial.BaseTrial, scan: ScanSection) -> dict[str, Any]:
    """Draw one point of ``scan.space``; returns the Optuna parameters (= ``trial.params``)."""
    space = scan.space
    params: dict[str, Any] = {}
    if space.optimizer:
        name = trial.suggest_categorical("optimizer", list(space.optimizer))
        params["optimizer"] = name
        sub = space.optimizer[name]
        for key in OPTIMIZER_KEYS:
            dist = getattr(sub, key)
            if dist is not None:
                params[f"{name}.{key}"] = _draw(trial, f"{name}.{key}", dist)
    if space.layers is not None and space.units is not None:
        layers = _draw(trial, "layers", space.layers)
        params["layers"] = layers
        for k in range(1, layers + 1):
            params[f"units_{k}"] = _draw(trial, f"units_{k}", space.units)
    if space.activation is not None:
        params["activation"] = trial.suggest_categorical("activation", list(space.activation))
    for path, dist in space.parameters.items():
        params[path] = _draw(trial, path, dist)
    return params


def _value(dist: Range | Choices, value: Any) -> Any:
    """A stored value as the fit schema wants it: 500.0 back to 500 for an integer setting."""
    if isinstance(dist, Range) and dist.is_int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _settings(runcard: ScanRuncard, params: Mapping[str, Any]) -> dict[str, Any]:
    """The dotted-path settings that ``params`` fix, checking they are those of the space."""
    space = runcard.scan.space
    expected: set[str] = set(space.parameters)
    settings: dict[str, Any] = {
        "replicas": list(runcard.replica_ids),
        "folds": [list(fold) for fold in runcard.scan.folds],
    }
    problems: list[str] = []
    if space.optimizer:
        expected.add("optimizer")
        name = params.get("optimizer")
        if name in space.optimizer:
            settings["optimizer.name"] = name
            for key in OPTIMIZER_KEYS:
                dist = getattr(space.optimizer[name], key)
                if dist is not None:
                    expected.add(f"{name}.{key}")
                    if f"{name}.{key}" in params:
                        settings[f"optimizer.{key}"] = _value(dist, params[f"{name}.{key}"])
        elif "optimizer" in params:
            problems.append(f"optimizer {name!r} is not in the space")
    layers: int | None = None
    if space.layers is not None and space.units is not None:
        expected.add("layers")
        raw = params.get("layers")
        layers = _value(space.layers, raw)
        if isinstance(layers, int) and not isinstance(layers, bool) and layers >= 1:
            expected.update(f"units_{k}" for k in range(1, layers + 1))
            settings["architecture.nodes"] = [
                _value(space.units, params.get(f"units_{k}")) for k in range(1, layers + 1)
            ]
        elif "layers" in params:
            problems.append(f"layers must be an integer >= 1, got {raw!r}")
            layers = None
    if space.activation is not None:
        expected.add("activation")
    activation = params.get("activation", runcard.architecture.activations[0])
    if layers is not None:
        settings["architecture.activations"] = [activation] * layers
    elif space.activation is not None:
        settings["architecture.activations"] = [activation] * len(runcard.architecture.nodes)
    for path, dist in space.parameters.items():
        if path in params:
            settings[path] = _value(dist, params[path])
    missing = sorted(expected - set(params))
    unknown = sorted(set(params) - expected)
    if missing:
        problems.append("missing " + ", ".join(missing))
    if unknown:
        problems.append("not in the space: " + ", ".join(unknown))
    if problems:
        raise NotInSpace(
            "the parameters do not match the search space of the runcard: " + "; ".join(problems)
        )
    return settings


def fixed_runcard(runcard: ScanRuncard, params: Mapping[str, Any]) -> FitRuncard:
    """The fit runcard of a trial: the base runcard with the trial's parameters applied.

    The trial fits replicas 1..``scan.replicas`` of each of ``scan.folds``. Raises
    :class:`NotInSpace` when ``params`` are not a point of this runcard's space (another study's
    trial), and :class:`RuncardError` when the point makes an invalid fit runcard (a
    combination the load-time checks cannot exclude).
    """
    settings = _settings(runcard, params)
    return runcard_from_dict(with_settings(fit_part(runcard), settings), "<trial parameters>")


def export_text(
    runcard: ScanRuncard, params: Mapping[str, Any], provenance: Mapping[str, Any]
) -> str:
    """The fixed runcard of a trial as YAML, headed by ``key: value`` comments of provenance.

    The file loads as an ordinary fit runcard and records every setting, so ``hyperscan fit``
    reproduces the trial's hyperparameters even if defaults change later.
    """
    lines = ["Fit runcard exported by hyperscan from a scan trial."]
    lines += [f"{key}: {' '.join(str(value).split())}" for key, value in provenance.items()]
    return dump_runcard(fixed_runcard(runcard, params), header="\n".join(lines))
