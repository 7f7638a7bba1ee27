# SPDX-License-Identifier: GPL-3.0-or-later
"""The members of a fit: which replicas, the seeds they derive theirs from, and the folds that
hold datasets out of their training (members = folds × replicas)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Discriminator, Field, Tag

from ._base import (
    MAX_REPLICAS,
    UNION_ERROR,
    Int,
    ReplicaId,
    Seed,
    Str,
    _is_sequence,
    _Section,
    _unique,
    fail_at,
)


def _replicas_form(value: Any) -> str | None:
    """Pick the form of ``replicas`` from the input, so errors come from that form only."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return "count"
    if _is_sequence(value):
        return "ids"
    return None


#: ``replicas: N`` fits replicas 1..N; ``replicas: [3, 7]`` fits exactly those replicas (the
#: replica id seeds its pseudodata and split, so replica 7 is the same in either runcard).
_ReplicaCount = Annotated[Int, Field(ge=1, le=MAX_REPLICAS), Tag("count")]
_ReplicaIds = Annotated[
    tuple[ReplicaId, ...],
    Field(min_length=1, max_length=MAX_REPLICAS),
    AfterValidator(_unique),
    Tag("ids"),
]
Replicas = Annotated[
    _ReplicaCount | _ReplicaIds,
    Discriminator(
        _replicas_form,
        custom_error_type=UNION_ERROR,
        custom_error_message="expected a number of replicas (an integer >= 1) "
        "or a non-empty list of distinct replica ids (integers >= 1)",
    ),
]


class Seeds(_Section):
    """Base seeds; each is combined with the replica id so replicas are reproducible alone."""

    data: Seed = 1
    """Base seed of each replica's pseudodata, combined with the replica id."""
    split: Seed = 2
    """Base seed of each replica's training/validation split, combined with the replica id."""
    network: Seed = 3
    """Base seed of each replica's weights and preprocessing exponents, combined with the replica
    id: a replica does not depend on what else is batched.
    """


#: One fold of a k-fold partition: the names of the datasets its members do not train on.
Fold = Annotated[tuple[Str, ...], Field(min_length=1), AfterValidator(_unique)]


def check_disjoint_folds(folds: tuple[tuple[str, ...], ...], key: str) -> None:
    """A dataset belongs to one fold only; ``key`` is where the folds are (in messages)."""
    first: dict[str, int] = {}
    problems: list[tuple[tuple[Any, ...], str]] = []
    for fold, names in enumerate(folds):
        for index, name in enumerate(names):
            if name in first:
                problems.append(
                    (
                        (fold, index),
                        f"{name!r} is already in fold {first[name]} "
                        f"({key}[{first[name]}]); a dataset belongs to one fold only",
                    )
                )
            else:
                first[name] = fold
    fail_at(problems, folds)


def folds_outside(folds: tuple[tuple[str, ...], ...], datasets: Any) -> list[tuple[Any, str]]:
    """Fold entries missing from a listed ``data.datasets``, at (fold, index)."""
    if not _is_sequence(datasets):
        return []  # all datasets: the names are checked against the data once they are built
    return [
        ((fold, index), f"{name!r} is not among the fitted datasets (data.datasets)")
        for fold, names in enumerate(folds)
        for index, name in enumerate(names)
        if name not in datasets
    ]
