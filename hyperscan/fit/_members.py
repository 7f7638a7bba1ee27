"""From a runcard to the ensemble's members: their data, splits, preprocessing and weights."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hyperscan.data import FIT_BASIS, Problem, level1_data, replica_data, training_mask
from hyperscan.model import (
    HELD_OUT,
    TRAINING,
    VALIDATION,
    MemberInputs,
    MemberShapes,
    Shape,
    embed,
    initial_weights,
)
from hyperscan.runcard import FitRuncard


@dataclass(frozen=True)
class MemberSpec:
    """One member of an ensemble: a replica, optionally with a fold of datasets held out, of
    one of the runcard's level-1 fits (closure ``fits``)."""

    replica: int
    held_out: tuple[str, ...] = ()
    fold: int = -1
    level1: int = 0


def member_specs(
    replicas: Sequence[int], folds: Sequence[Sequence[str]] = (), level1_fits: int = 1
) -> list[MemberSpec]:
    """Members = level-1 fits × folds × replicas, fit by fit, fold by fold; each fold's
    datasets held out of its members' training. Without folds, the replicas alone.

    A fit runcard's members are ``member_specs(card.replica_ids, card.folds,
    card.data.level1_fits)``; a scan trial's are those of its fit runcard, so an exported
    trial is refitted member for member.
    """
    return [
        MemberSpec(replica, held_out=tuple(fold), fold=k, level1=j)
        for j in range(level1_fits)
        for k, fold in (enumerate(folds) if folds else [(-1, ())])
        for replica in replicas
    ]


def build_members(
    runcard: FitRuncard,
    problem: Problem,
    specs: Sequence[MemberSpec],
    member_runcards: Sequence[FitRuncard] | None = None,
    level1: np.ndarray | None = None,
) -> tuple[MemberInputs, list[np.ndarray]]:
    """Member inputs and stacked initial weights (M, ...) for the given member specs.

    Everything a member gets is drawn from seeds keyed by its replica number, so a member
    is the same whether it is fitted alone or in an ensemble of any size. With
    `member_runcards` (one per spec), each member's seeds, preprocessing ranges, initializer
    and widths are its own runcard's, and members of different architectures are embedded in
    the padded widths of `member_shapes` (model/_shapes.py). `level1`: the runcard's
    `level1_data`, when the caller has it (each extra level-1 fit is a load of the data).
    """
    cards = list(member_runcards) if member_runcards is not None else [runcard] * len(specs)
    shapes = member_shapes(cards)
    names = [d.name for d in problem.datasets]
    if level1 is None:
        level1 = level1_data(runcard, problem)  # (fits, N) each level-1 fit's central data
    data, categories, alphas, betas, weights = [], [], [], [], []
    for spec, card in zip(specs, cards, strict=True):
        seeds = card.seeds
        mask = training_mask(problem, spec.replica, seeds.split, runcard.data.training_fraction)
        member_categories = np.where(mask, TRAINING, VALIDATION)
        for name, block in zip(names, problem.dataset_slices(), strict=True):
            if name in spec.held_out:
                member_categories[block] = HELD_OUT
        categories.append(member_categories)
        central = level1[spec.level1]
        member_data = (
            replica_data(problem, spec.replica, seeds.data, central)
            if runcard.data.pseudodata
            else central
        )
        # A held-out fold is scored against the central data, as n3fit scores its folds: the
        # replica's fluctuations there are noise the network never saw (and, through shared
        # systematics, correlated with the training data's), not a test of generalisation.
        data.append(np.where(member_categories == HELD_OUT, central, member_data))
        rng = np.random.default_rng(np.random.SeedSequence([seeds.network, spec.replica]))
        ranges = [card.preprocessing[flavour] for flavour in FIT_BASIS]
        alphas.append([rng.uniform(*r.alpha) for r in ranges])
        betas.append([rng.uniform(*r.beta) for r in ranges])
        own = initial_weights(card.architecture.nodes, card.architecture.initializer, rng)
        weights.append(own if shapes is None else _padded(own, card, shapes))
    inputs = MemberInputs(
        data=np.array(data),
        categories=np.array(categories),
        alpha=np.array(alphas),
        beta=np.array(betas),
    )
    stacked = [np.stack(per_layer) for per_layer in zip(*weights, strict=True)]
    return inputs, stacked


def member_shapes(member_runcards: Sequence[FitRuncard]) -> MemberShapes | None:
    """The members' architectures padded to one model; None when they all share one, so that
    a homogeneous fit computes as it always has (no masks, no selects)."""
    shapes = [architecture_shape(card) for card in member_runcards]
    return None if len(set(shapes)) == 1 else MemberShapes.of(shapes)


def architecture_shape(card: FitRuncard) -> Shape:
    return Shape(tuple(card.architecture.nodes), tuple(card.architecture.activations))


def _padded(own: list[np.ndarray], card: FitRuncard, shapes: MemberShapes) -> list[np.ndarray]:
    return embed(own, card.architecture.nodes, shapes.widths)


def redrawn_weights(
    runcard: FitRuncard, spec: MemberSpec, attempt: int, shapes: MemberShapes | None = None
) -> list[np.ndarray]:
    """A member's ``attempt``-th replacement start: its own stream, so batching cannot matter.
    `runcard` is the member's own; `shapes` the padded model's (None: not padded)."""
    seeds = [runcard.seeds.network, spec.replica, attempt]
    rng = np.random.default_rng(np.random.SeedSequence(seeds))
    own = initial_weights(runcard.architecture.nodes, runcard.architecture.initializer, rng)
    return own if shapes is None else _padded(own, runcard, shapes)
