# SPDX-License-Identifier: GPL-3.0-or-later
"""The problem a runcard's ``data`` section asks for.

Here rather than in ``fit`` so that a coordinator (study creation, data fingerprints) builds
it without TensorFlow.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hyperscan.runcard import SHIPPED_THEORY_ID, DataSection, FitRuncard, RuncardError

from ._closure import closure_problem
from ._problem import Problem
from ._real import SHIPPED_Q0, SHIPPED_THEORY_CARD, real_problem
from ._replicas import training_mask
from ._theory import find_theory


def load_problem(runcard: FitRuncard, source: str = "<runcard>") -> Problem:
    """The runcard's data; a dataset name (in ``data.datasets`` or ``folds``) that the data do
    not have is a :class:`RuncardError` naming ``source``: only now can the names be checked."""
    problem = _fitted_data(runcard.data, source)
    _check_names({f"folds[{k}]": fold for k, fold in enumerate(runcard.folds)}, problem, source)
    empty = empty_folds(runcard.folds, problem, "folds")
    if empty:
        raise RuncardError(empty, source=source)
    untrained = untrained_members(
        problem,
        runcard.replica_ids,
        runcard.folds,
        runcard.seeds.split,
        runcard.data.training_fraction,
    )
    if untrained:
        raise RuncardError(untrained, source=source)
    return problem


def level1_data(runcard: FitRuncard, problem: Problem) -> np.ndarray:
    """(F, N) the central data of each of the runcard's ``closure.fits`` level-1 fits, row 0
    ``problem``'s own: fit j's are fluctuated with seed ``seed`` + j, exactly as a one-fit
    runcard with that seed fluctuates them, so a member of fit j is that runcard's replica."""
    fits = runcard.data.level1_fits
    others = [_level1_central(runcard.data, fit) for fit in range(1, fits)]
    return np.stack([problem.central, *others])


@functools.lru_cache(maxsize=32)
def _level1_central(data: DataSection, fit: int) -> np.ndarray:
    """Level-1 fit ``fit``'s central data, kept: each is a load of the data (2 s for the five
    fits of the real DIS closure scan), and a scan worker fits trial after trial on the same
    ``data`` section (frozen, so it hashes by value)."""
    central = _fitted_data(data, "<runcard>", fit).central
    central.setflags(write=False)
    return central


@dataclass(frozen=True)
class FitTheory:
    """The theory a fit's PDFs live in: its NNPDF theory ID, the scale Q0 of x·f, its card."""

    id: int
    q0: float
    card: Path


def fit_theory(data: DataSection) -> FitTheory:
    """The theory folder's, or that of the shipped tables: hyperscan's built-in closure tables
    have no scale of their own, and stand in for theory 99000001's at its Q0."""
    real = data.real
    if real is not None and real.theory is not None:
        theory = find_theory(real.theory)
        return FitTheory(theory.id, theory.q0, theory.card)
    return FitTheory(SHIPPED_THEORY_ID, SHIPPED_Q0, SHIPPED_THEORY_CARD)


def _fitted_data(data: DataSection, source: str, fit: int = 0) -> Problem:
    """A runcard's ``data``, its ``datasets`` selected, with level-1 fit ``fit``'s
    fluctuation."""
    real, closure = data.real, data.closure
    if real is not None:
        try:
            problem = real_problem(
                [{"dataset": d.dataset, "variant": d.variant} for d in real.datasets],
                q2min=real.q2min,
                w2min=real.w2min,
                t0=real.t0,
                closure_level=None if real.closure is None else real.closure.level,
                closure_seed=0 if real.closure is None else real.closure.seed + fit,
                theory=real.theory,
                positivity=real.positivity,
            )
        except ValueError as error:  # the schema checked the rest: cuts that leave no point
            raise RuncardError([("data.real", str(error))], source=source) from None
    else:
        assert closure is not None  # the schema requires one of them
        problem = closure_problem(closure.size, level=closure.level, seed=closure.seed + fit)
    if data.datasets != "all":
        _check_names({"data.datasets": data.datasets}, problem, source)
        problem = problem.select(list(data.datasets))
    return problem


def untrained_members(
    problem: Problem,
    replicas: Sequence[int],
    folds: Sequence[Sequence[str]],
    seed: int,
    fraction: float,
) -> list[tuple[str, str]]:
    """``data.training_fraction`` problems: members whose split leaves them no training point.

    Such a member would take no gradient and end as a veto, for a reason no message would
    tell. Only a fraction that gives every fitted dataset less than one point can do it, so
    only then are the members' splits drawn.
    """
    members, masks = [], {}
    for k, held_out in enumerate([set(fold) for fold in folds] or [set()]):
        fitted = [
            (dataset, block)
            for dataset, block in zip(problem.datasets, problem.dataset_slices(), strict=True)
            if dataset.name not in held_out
        ]
        if any(int(fraction * dataset.n_data) >= 1 for dataset, _ in fitted):
            continue
        for replica in replicas:
            if replica not in masks:  # the same in every fold
                masks[replica] = training_mask(problem, replica, seed, fraction)
            if not any(masks[replica][block].any() for _, block in fitted):
                members.append(f"replica {replica}" + (f" of fold {k}" if folds else ""))
    if not members:
        return []
    named = ", ".join(members[:3]) + (f" and {len(members) - 3} more" if len(members) > 3 else "")
    return [
        (
            "data.training_fraction",
            f"{fraction} leaves {named} no training point (a dataset trains floor(fraction x "
            "its points), or one point with that probability when this is 0): raise it",
        )
    ]


def empty_folds(
    folds: Sequence[Sequence[str]], problem: Problem, key: str
) -> list[tuple[str, str]]:
    """Folds that hold out every dataset, which would leave their members nothing to train on."""
    everything = set(problem.names)
    return [
        (f"{key}[{k}]", "holds out every fitted dataset: its members would train on nothing")
        for k, fold in enumerate(folds)
        if everything <= set(fold)
    ]


def _check_names(lists: dict[str, Sequence[str]], problem: Problem, source: str) -> None:
    unknown = unknown_names(lists, problem)
    if unknown:
        raise RuncardError(unknown, source=source)


def unknown_names(lists: dict[str, Sequence[str]], problem: Problem) -> list[tuple[str, str]]:
    """``(key[i], message)`` for each name in ``lists`` (by runcard key) the data lack."""
    available = problem.names
    return [
        (f"{key}[{i}]", f"no dataset {name!r}; datasets: {', '.join(available)}")
        for key, names in lists.items()
        for i, name in enumerate(names)
        if name not in available
    ]
