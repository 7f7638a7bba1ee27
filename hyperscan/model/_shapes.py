"""Members of different architectures in one batched network: padded widths, skipped layers,
an activation per member and layer.

A model's *shape* is its hidden widths W_0..W_{L-1}. A member of depth d ≤ L and widths
n_0..n_{d-1} is embedded in it: its layer k's kernel fills the top-left (n_{k-1}, n_k) corner of
the padded (W_{k-1}, W_k) one and its bias the first n_k entries; everything else is exactly
zero and its gradient is masked to zero, so it stays zero. A padded unit's value is
activation(0) (0.5 for a sigmoid), but its outgoing weights are zero: it never reaches the
output. The member's missing layers d..L-1 sit after its last hidden layer, before the output
layer, and pass their input through unchanged (no activation): the model's width at layer
l ≥ d is at least n_{d-1}, so the pass-through keeps every unit the member uses, and the
output kernel's first n_{d-1} rows are the member's own. A *shape class* is a set of members
fitted in one such padded model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from hyperscan.model._member_axis import MemberAxis
from hyperscan.model._network import layer_sizes


@dataclass(frozen=True)
class Shape:
    """One member's architecture: hidden widths and one activation per hidden layer."""

    nodes: tuple[int, ...]
    activations: tuple[str, ...]

    @property
    def cost(self) -> int:
        """Σ fan_in·fan_out over its layers: the multiply-adds of its forward pass per x."""
        return layer_cost(self.nodes)


def layer_cost(nodes: Sequence[int]) -> int:
    sizes = layer_sizes(nodes)
    return sum(a * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))


def padded_widths(shapes: Sequence[Shape]) -> tuple[int, ...]:
    """The model's hidden widths: at each layer, the widest member there, a member past its
    depth counting with its last hidden width (what it passes through)."""
    depth = max(len(s.nodes) for s in shapes)
    return tuple(
        max(s.nodes[min(layer, len(s.nodes) - 1)] for s in shapes) for layer in range(depth)
    )


def padding_waste(shapes: Sequence[Shape]) -> float:
    """1 − Σ member cost / (members × padded cost): the fraction of the padded model's
    multiply-adds that compute nothing a member uses."""
    padded = layer_cost(padded_widths(shapes))
    return 1.0 - sum(s.cost for s in shapes) / (len(shapes) * padded)


def shape_classes(shapes: Sequence[Shape], max_waste: float) -> list[np.ndarray]:
    """Members (indices) grouped into few shape classes, each within `max_waste`; one class
    when all of them are. Greedy and deterministic: members from the costliest down (ties by
    index) join the first class they keep within the limit, or open a new one. Each class
    lists its members in member order; classes are ordered by their first member."""
    if padding_waste(shapes) <= max_waste:
        return [np.arange(len(shapes))]
    order = sorted(range(len(shapes)), key=lambda m: (-shapes[m].cost, m))
    classes: list[list[int]] = []
    for member in order:
        for members in classes:
            if padding_waste([shapes[m] for m in [*members, member]]) <= max_waste:
                members.append(member)
                break
        else:
            classes.append([member])
    return sorted((np.array(sorted(c)) for c in classes), key=lambda c: int(c[0]))


@dataclass(frozen=True)
class MemberShapes:
    """The members' architectures within one padded model; the model's network reads
    `activation`, `skip`, and the trainer masks gradients with `gradient_mask`."""

    member_axis: ClassVar[MemberAxis] = MemberAxis(
        {"activation": 0, "skip": 0, "gradient_mask": 0, "depth": 0}
    )

    widths: tuple[int, ...]  # the model's hidden widths
    names: tuple[str, ...]  # the activations present, sorted
    activation: np.ndarray  # (M, L) index into names; a skipped layer keeps its last
    skip: np.ndarray  # (M, L) bool: the layer passes its input through
    depth: np.ndarray  # (M,) hidden layers of each member
    gradient_mask: np.ndarray  # (M, P) bool: the member's own parameters in the flat layout

    @classmethod
    def of(
        cls,
        shapes: Sequence[Shape],
        widths: Sequence[int] | None = None,
        names: Sequence[str] | None = None,
    ) -> MemberShapes:
        """The shapes of `shapes` padded to `widths` with the activations `names` (default:
        the least that holds them; a trial batch passes its own, to refill its rows)."""
        widths = tuple(widths or padded_widths(shapes))
        names = tuple(names or sorted({a for s in shapes for a in s.activations}))
        depth = np.array([len(s.nodes) for s in shapes])
        last = [[min(layer, d - 1) for layer in range(len(widths))] for d in depth]
        activation = np.array(
            [
                [names.index(s.activations[k]) for k in row]
                for s, row in zip(shapes, last, strict=True)
            ]
        )
        skip = np.arange(len(widths))[None, :] >= depth[:, None]
        ones = [[np.ones_like(w) for w in zero_weights(s.nodes)] for s in shapes]
        mask = [
            np.concatenate([p.ravel() for p in embed(w, s.nodes, widths)]) > 0
            for w, s in zip(ones, shapes, strict=True)
        ]
        return cls(widths, names, activation, skip, depth, np.array(mask))


def zero_weights(nodes: Sequence[int]) -> list[np.ndarray]:
    sizes = layer_sizes(nodes)
    shapes = [(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
    return [np.zeros(shape) for pair in shapes for shape in (pair, pair[1:])]


def embed(
    weights: Sequence[np.ndarray], nodes: Sequence[int], widths: Sequence[int]
) -> list[np.ndarray]:
    """A member's [kernel, bias, ...] for hidden widths `nodes` in a model of `widths`: its
    layers in the first ones, the output layer last, zeros everywhere else."""
    padded = zero_weights(widths)
    depth, total = len(nodes), len(widths)
    for layer in range(depth):
        kernel, bias = weights[2 * layer], weights[2 * layer + 1]
        padded[2 * layer][: kernel.shape[0], : kernel.shape[1]] = kernel
        padded[2 * layer + 1][: bias.shape[0]] = bias
    kernel, bias = weights[2 * depth], weights[2 * depth + 1]
    padded[2 * total][: kernel.shape[0]] = kernel
    padded[2 * total + 1][:] = bias
    return padded


def unembed(
    padded: Sequence[np.ndarray], nodes: Sequence[int], widths: Sequence[int]
) -> list[np.ndarray]:
    """The inverse of `embed`: a member's own weights out of the padded ones."""
    own = zero_weights(nodes)
    depth, total = len(nodes), len(widths)
    for layer in range(depth):
        rows, cols = own[2 * layer].shape
        own[2 * layer][:] = padded[2 * layer][:rows, :cols]
        own[2 * layer + 1][:] = padded[2 * layer + 1][:cols]
    own[2 * depth][:] = padded[2 * total][: own[2 * depth].shape[0]]
    own[2 * depth + 1][:] = padded[2 * total + 1]
    return own
